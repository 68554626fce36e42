#include "cli/options.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "core/error.h"
#include "train/data.h"

namespace tt {

namespace {

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace

bool parse_train_options(const std::vector<std::string>& args, TrainOptions& o) {
  CLI::App app{"Train a Tiny LLaMA from scratch (CPU reference or CUDA, versions v1..v4)", "tiny_llama"};
  ModelConfig& m = o.model;
  std::string device = "auto", version = "v1";
  bool use_amp = false;
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // last one wins

  app.add_option("--batch-size", o.batch, "sequences per step")->capture_default_str();
  app.add_option("--seq-len", o.seq_len, "tokens per sequence")->capture_default_str();
  app.add_option("--num-steps", o.steps, "optimizer steps (total, also when resuming)")->capture_default_str();
  app.add_option("--hidden-dim", m.hidden, "model width")->capture_default_str();
  app.add_option("--num-layers", m.layers, "transformer blocks")->capture_default_str();
  app.add_option("--num-heads", m.heads, "attention heads")->capture_default_str();
  CLI::Option* kv = app.add_option("--num-kv-heads", m.kv_heads, "key/value heads (default: heads/2)");
  CLI::Option* ffn = app.add_option("--intermediate-size", m.intermediate, "SwiGLU width (default: 4 x hidden)");
  CLI::Option* vocab = app.add_option("--vocab-size", m.vocab_size, "vocabulary (256 for a text file)")
                           ->capture_default_str();
  app.add_option("--norm-eps", m.norm_eps, "RMSNorm epsilon")->capture_default_str();
  app.add_option("--rope-theta", m.rope_theta, "RoPE base")->capture_default_str();
  app.add_option("--learning-rate", o.learning_rate, "AdamW learning rate")->capture_default_str();
  app.add_option("--weight-decay", o.weight_decay, "AdamW decoupled weight decay")->capture_default_str();
  app.add_option("--seed", o.seed, "initialisation and synthetic data")->capture_default_str();
  app.add_option("--warmup-steps", o.warmup, "steps excluded from timing")->capture_default_str();
  app.add_option("--log-every", o.log_every, "print a line (and validation loss) every N steps")
      ->capture_default_str();
  app.add_flag("--use-amp", use_amp, "bf16 mixed precision (CUDA; fp32 master weights and optimizer)");
  bool tf32 = false;
  app.add_flag("--tf32", tf32, "allow TF32 tensor-core products in fp32 (default: true fp32)");
  app.add_option("--device", device, "auto, cpu or cuda")->capture_default_str();
  app.add_option("--version", version, "optimization level: v1, v2, v3 or v4")->capture_default_str();
  app.add_option("--data", o.data, "synthetic, or a text file whose bytes are the tokens")->capture_default_str();
  app.add_option("--json", o.json_path, "write the summary and per-step losses as JSON");
  app.add_option("--save", o.save_path, "write a checkpoint (safetensors) at the end");
  app.add_option("--resume", o.resume_path, "continue from a checkpoint written by --save");
  app.add_option("--profile", o.profile_dir, "kernel trace (CUPTI) into DIR: trace.json, kernels.csv, regions.csv");
  app.add_option("--profile-steps", o.profile_steps, "steps traced after the warm-up")->capture_default_str();
  app.add_flag("--flops-profile", o.flops_profile, "per-module FLOPs, time, TFLOP/s and MFU (traces like --profile)");
  bool no_nvtx = false;
  app.add_flag("--no-nvtx", no_nvtx, "leave out the named ranges (only to measure what they cost)");

  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 consumes from the back
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return false;
  } catch (const CLI::ParseError& e) {
    usage_fail(one_line(e.what()) + " (see --help)");
  }

  if (!kv->count()) m.kv_heads = m.heads % 2 == 0 ? m.heads / 2 : m.heads;
  if (!ffn->count()) m.intermediate = 4 * m.hidden;
  if (o.data != "synthetic" && !vocab->count()) m.vocab_size = kTextVocab;

  if (device == "auto") o.backend.device = DeviceKind::Auto;
  else if (device == "cpu") o.backend.device = DeviceKind::Cpu;
  else if (device == "cuda") o.backend.device = DeviceKind::Cuda;
  else usage_fail("--device: must be auto, cpu or cuda (got '" + device + "')");

  if (version.size() != 2 || version[0] != 'v' || version[1] < '1' || version[1] > '4')
    usage_fail("--version: must be one of v1, v2, v3, v4 (got '" + version + "')");
  o.backend.plan = plan_for_version(version[1] - '0');
  o.backend.plan.amp = use_amp;
  o.backend.plan.tf32 = tf32;
  o.backend.nvtx = !no_nvtx;
  return true;
}

}  // namespace tt

#!/usr/bin/env node
// Optional: the tokenizers library's side of tests/gpu/test_gpu_tokenizers.cpp through its Node
// binding, for a machine without Python's tokenizers (the GPU machine has that, and the test uses
// tests/gpu/bpe_check.py there). The same commands as bpe_check.py:
//
//   bpe_check.cjs train CORPUS DIR gpt2|llama3   a byte-level BPE of that family's kind, trained on
//                                                CORPUS, as DIR/tokenizer.json and tokenizer_config.json
//   bpe_check.cjs encode TOKENIZER TEXTS OUT     the ids of each text of the JSON list TEXTS (no
//                                                special tokens added), as a JSON list
//   bpe_check.cjs pretokenize TOKENIZER TEXTS OUT  each text's words, as the pre-tokenizer cuts them,
//                                                joined by spaces
//
// Node's binding cannot turn split_special_tokens on: `encode` hides the special tokens instead
// (load below), which is the same but where a special token overlaps one that is not special
// (Python's check covers that case). Needs Node and the package, outside the repository:
//   mkdir -p /tmp/npm-tok && cd /tmp/npm-tok && npm install tokenizers@0.23.2
//   TT_BPE_CHECK="env NODE_PATH=/tmp/npm-tok/node_modules node tools/bpe_check.cjs" \
//     build/tests/tokenizer_tests
"use strict";
const fs = require("fs");
const path = require("path");
const { Tokenizer } = require("tokenizers");

const LLAMA3 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" +
               "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// GPT-2's printable characters for the 256 bytes (tokenizer.json spells byte-level tokens in them).
function byteCharacters() {
  const out = [];
  let next = 256;
  for (let b = 0; b < 256; ++b) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    out.push(String.fromCodePoint(printable ? b : next++));
  }
  return out;
}

function train(corpus, directory, family) {
  const llama3 = family === "llama3";
  const byteLevel = (regex) => ({ type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: regex });
  const file = {
    version: "1.0", truncation: null, padding: null, added_tokens: [], normalizer: null,
    pre_tokenizer: llama3 ? { type: "Sequence", pretokenizers: [
      { type: "Split", pattern: { Regex: LLAMA3 }, behavior: "Isolated", invert: false }, byteLevel(false)] }
      : byteLevel(true),
    post_processor: null, decoder: byteLevel(true),
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
             fuse_unk: false, byte_fallback: false, ignore_merges: llama3, vocab: {}, merges: [] },
  };
  const tok = Tokenizer.fromString(JSON.stringify(file));
  tok.train([corpus]);  // the model's own trainer: every merge the corpus has
  const trained = JSON.parse(saveToString(tok));
  const vocab = trained.model.vocab;
  let next = Object.keys(vocab).length;
  for (const c of byteCharacters()) if (!(c in vocab)) vocab[c] = next++;  // every byte a token
  const special = llama3 ? ["<|begin_of_text|>", "<|end_of_text|>"] : ["<|endoftext|>"];
  trained.added_tokens = special.map((content) => ({ id: next++, content, single_word: false, lstrip: false,
                                                      rstrip: false, normalized: false, special: true }));
  if (llama3) {  // BOS in front, as LLaMA-3's post-processor puts it
    trained.post_processor = { type: "TemplateProcessing",
      single: [{ SpecialToken: { id: special[0], type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
      pair: [{ SpecialToken: { id: special[0], type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
             { SpecialToken: { id: special[0], type_id: 1 } }, { Sequence: { id: "B", type_id: 1 } }],
      special_tokens: { [special[0]]: { id: special[0], ids: [trained.added_tokens[0].id], tokens: [special[0]] } } };
  }
  fs.mkdirSync(directory, { recursive: true });
  fs.writeFileSync(path.join(directory, "tokenizer.json"), JSON.stringify(trained));
  fs.writeFileSync(path.join(directory, "tokenizer_config.json"), JSON.stringify(
    { bos_token: special[0], eos_token: special[special.length - 1], tokenizer_class: "PreTrainedTokenizerFast" }));
}

function saveToString(tok) {
  const file = path.join(fs.mkdtempSync("/tmp/bpe_check."), "t.json");
  tok.save(file);
  const text = fs.readFileSync(file, "utf8");
  fs.rmSync(path.dirname(file), { recursive: true });
  return text;
}

// The tokenizer as the library reads it, its special tokens never found in a text (as with
// split_special_tokens): left out where the model has a token spelt the same (its id is the
// model's), else kept, for the ids of the tokens after it, under a text no text holds.
function load(file) {
  const j = JSON.parse(fs.readFileSync(file, "utf8"));
  j.added_tokens = (j.added_tokens || []).filter((t) => !(t.special && t.content in j.model.vocab));
  for (const t of j.added_tokens) if (t.special) t.content = "\u{10FFFF}\u{10FFFE}" + t.id;
  return Tokenizer.fromString(JSON.stringify(j));
}

async function encode(file, textsPath, out) {
  const tok = load(file);
  const texts = JSON.parse(fs.readFileSync(textsPath, "utf8"));
  const ids = [];
  for (let i = 0; i < texts.length; i += 64) {
    const batch = await tok.encodeBatch(texts.slice(i, i + 64), { addSpecialTokens: false });
    for (const e of batch) ids.push(e.getIds());
  }
  fs.writeFileSync(out, JSON.stringify(ids));
}

function pretokenize(file, textsPath, out) {
  const pre = load(file).getPreTokenizer();
  const texts = JSON.parse(fs.readFileSync(textsPath, "utf8"));
  fs.writeFileSync(out, JSON.stringify(texts.map((t) => pre.preTokenizeString(t).map((w) => w[0]).join(" "))));
}

const [command, ...args] = process.argv.slice(2);
if (command === "train") train(...args);
else if (command === "encode") encode(...args).catch((e) => { console.error(e); process.exit(1); });
else if (command === "pretokenize") pretokenize(...args);
else { console.error("usage: bpe_check.cjs train|encode|pretokenize ..."); process.exit(2); }

#!/usr/bin/env python3
"""Checks an exported directory (tiny_llama export) with Hugging Face transformers, for
tests/gpu/test_gpu_hf.cpp: loads it with AutoModelForCausalLM and AutoTokenizer, and compares
the logits of a batch, the greedy continuation and the tokenizer's ids with ours, given as JSON.

  hf_check.py DIR EXPECTED.json    (keys: tokens, logits [T x V], tolerance, prompt, greedy,
                                    sentence, sentence_ids); exit 0 when all agree.
"""
import json
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    directory, expected_path = sys.argv[1], sys.argv[2]
    e = json.load(open(expected_path))
    model = AutoModelForCausalLM.from_pretrained(directory, torch_dtype=torch.float32).eval()
    tokens = torch.tensor([e["tokens"]])
    with torch.no_grad():
        logits = model(tokens).logits[0].double()
    ours = torch.tensor(e["logits"], dtype=torch.float64)
    err = ((logits - ours).norm() / ours.norm()).item()
    print(f"logits: relative error {err:.3e} (bound {e['tolerance']})")
    ok = err <= e["tolerance"]
    if e["greedy"]:  # (not compared for bf16 weights: rounding may change a close choice)
        with torch.no_grad():
            out = model.generate(torch.tensor([e["prompt"]]), max_new_tokens=len(e["greedy"]), do_sample=False,
                                 eos_token_id=None, pad_token_id=0)
        greedy = out[0, len(e["prompt"]):].tolist()
        print(f"greedy: transformers {greedy}, ours {e['greedy']}")
        ok &= greedy == e["greedy"]
    tok = AutoTokenizer.from_pretrained(directory)
    ids = tok(e["sentence"])["input_ids"]
    print(f"tokenizer: transformers {ids}, ours {e['sentence_ids']}")
    ok &= ids == e["sentence_ids"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Checks an exported directory (tiny_llama export) with Hugging Face transformers, for
tests/gpu/test_gpu_hf.cpp: loads it with AutoModelForCausalLM and AutoTokenizer, and compares
the logits of a batch, the greedy continuation and the tokenizer's ids with ours, given as JSON:
through transformers' AutoTokenizer (which must be the fast one, read from tokenizer.json; special
tokens in the text split, as ours) and through the tokenizers library reading tokenizer.json
itself; the decoded text; the padding token, and no length limit.

  hf_check.py DIR EXPECTED.json    (keys: tokens, logits [T x V], tolerance, prompt, greedy,
                                    sentences, sentence_ids, pad_token); exit 0 when all agree.
"""
import json
import os
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
    from tokenizers import Tokenizer
    tok = AutoTokenizer.from_pretrained(directory, split_special_tokens=True)
    raw = Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
    raw.encode_special_tokens = True
    print(f"tokenizer: {type(tok).__name__}, fast {tok.is_fast}, pad_token {tok.pad_token!r} (ours {e['pad_token']!r}), "
          f"model_max_length {tok.model_max_length}")
    ok &= tok.is_fast and tok.pad_token == e["pad_token"] and tok.model_max_length >= 10**29
    for sentence, want in zip(e["sentences"], e["sentence_ids"]):
        ids, raw_ids = tok(sentence)["input_ids"], raw.encode(sentence).ids
        text = tok.decode(ids, skip_special_tokens=True)
        same = ids == want and raw_ids == want and text == sentence
        print(f"{'ok ' if same else 'BAD'} {sentence[:40]!r}: transformers {ids[:12]}, tokenizers {raw_ids[:12]}, "
              f"ours {want[:12]}, decoded {text[:40]!r}")
        ok &= same
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

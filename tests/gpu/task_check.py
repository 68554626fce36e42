#!/usr/bin/env python3
"""Scores a multiple-choice task file with Hugging Face transformers on an exported directory
(tiny_llama export --dtype fp32), for tests/gpu/test_gpu_eval.cpp, and compares with our scores.

Each example is read and tokenized as lm-eval does it, independently of ours: the context
(HellaSwag's "ctx", or "context") with its trailing whitespace moved into the continuation; the
continuation " " + ending encoded as the whole text's tokens after the context's, with
AutoTokenizer and no special tokens; the begin-of-document token in front where the tokenizer has
one that is not its end-of-document token. The model (AutoModelForCausalLM, fp32) gives each
ending's log-probability, the sum over its tokens of log_softmax in float64 of the fp32 logits.
Then the picks by sum, by mean per token (llm.c) and by sum per character (lm-eval), the first on
a tie, and the accuracies.

  task_check.py DIR TASK.jsonl OURS.json   (OURS: tiny_llama eval --task TASK.jsonl --json OURS.json)
Exit 0 when every token id is ours, every log-probability within 1e-4 of ours and each accuracy ours.
"""
import json
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

TOLERANCE = 1e-4


def first_best(values):
    return max(range(len(values)), key=lambda i: (values[i], -i))


def main():
    directory, task_path, ours_path = sys.argv[1:4]
    ours = json.load(open(ours_path))["tasks"][0]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(directory, torch_dtype=torch.float32).to(device).eval()
    tok = AutoTokenizer.from_pretrained(directory)
    bos = [tok.bos_token_id] if tok.bos_token_id is not None and tok.bos_token_id != tok.eos_token_id else []
    encode = lambda text: tok(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    assert ours["truncated"] == 0, "the comparison scores whole rows: give eval a --seq-len they fit"
    ok, worst, correct = True, 0.0, {"acc": 0, "acc_norm": 0, "acc_norm_chars": 0}
    examples = [json.loads(line) for line in open(task_path) if line.strip()]
    assert len(examples) == len(ours["details"]), "as many examples as ours"
    for example, mine in zip(examples, ours["details"]):
        context = example["ctx"] if "ctx" in example else example["context"]
        stripped = context.rstrip()
        moved = context[len(stripped):]
        context_ids = bos + encode(stripped)
        if context_ids != mine["context_tokens"]:
            print(f"BAD line {mine['line']}: context tokens {context_ids[:12]}, ours {mine['context_tokens'][:12]}")
            ok = False
            continue
        sums, means, per_char = [], [], []
        for i, ending in enumerate(example["endings"]):
            whole = encode(stripped + moved + " " + ending)
            ending_ids = whole[len(context_ids) - len(bos):]
            if ending_ids != mine["ending_tokens"][i]:
                print(f"BAD line {mine['line']} ending {i}: tokens {ending_ids}, ours {mine['ending_tokens'][i]}")
                ok = False
            row = context_ids + ending_ids
            with torch.no_grad():
                logits = model(torch.tensor([row[:-1]], device=device)).logits[0]
                logprobs = torch.log_softmax(logits.double(), dim=-1).tolist()
            first = len(context_ids) - 1  # the position whose logits predict the ending's first token
            s = sum(logprobs[p][row[p + 1]] for p in range(first, first + len(ending_ids)))
            sums.append(s)
            means.append(s / len(ending_ids))
            per_char.append(s / len(ending))
            diff = abs(s - mine["logprob_sum"][i])
            worst = max(worst, diff)
            if diff > TOLERANCE:
                print(f"BAD line {mine['line']} ending {i}: log-probability {s:.6f}, ours {mine['logprob_sum'][i]:.6f}")
                ok = False
        label = int(example["label"])
        correct["acc"] += first_best(sums) == label
        correct["acc_norm"] += first_best(means) == label
        correct["acc_norm_chars"] += first_best(per_char) == label
    n = len(examples)
    print(f"{n} examples on {device}: every ending's log-probability within {worst:.2e} of ours (bound {TOLERANCE})")
    for name, count in correct.items():
        same = abs(count / n - ours[name]) < 1e-12
        print(f"{'ok ' if same else 'BAD'} {name}: transformers {count}/{n} = {count / n:.4f}, ours {ours[name]:.4f}")
        ok &= same
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

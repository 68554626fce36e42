#!/usr/bin/env python3
"""The tokenizers library's side of tests/gpu/test_gpu_hf.cpp's byte-level BPE checks.

  bpe_check.py train CORPUS DIR gpt2|llama3   trains a byte-level BPE of that family's kind on the
                                              text file CORPUS (vocabulary 2000) and writes
                                              DIR/tokenizer.json and DIR/tokenizer_config.json
  bpe_check.py encode TOKENIZER TEXTS OUT      encodes each text of the JSON list TEXTS with the
                                              tokenizer.json TOKENIZER (no special tokens added,
                                              no truncation) and writes the ids to OUT as a JSON
                                              list; exit 1 if one does not decode to its text
"""
import json
import os
import sys

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
          r"\s*[\r\n]+|\s+(?!\S)|\s+")


def train(corpus, directory, family):
    llama3 = family == "llama3"
    tok = Tokenizer(models.BPE(ignore_merges=llama3))
    if llama3:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        special = ["<|begin_of_text|>", "<|end_of_text|>"]
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        special = ["<|endoftext|>"]
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train([corpus], trainer)
    if llama3:  # BOS in front, as LLaMA-3's post-processor puts it
        tok.post_processor = processors.TemplateProcessing(
            single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", tok.token_to_id("<|begin_of_text|>"))])
    os.makedirs(directory, exist_ok=True)
    tok.save(os.path.join(directory, "tokenizer.json"))
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": special[0], "eos_token": special[-1], "tokenizer_class": "PreTrainedTokenizerFast"}, f)


def encode(path, texts_path, out_path):
    tok = Tokenizer.from_file(path)
    tok.no_truncation()
    tok.no_padding()
    texts = json.load(open(texts_path))
    ids = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    bad = 0
    for text, i in zip(texts, ids):
        if tok.decode(i, skip_special_tokens=False) != text:
            bad += 1
            print(f"does not decode to its text: {text[:60]!r}")
    json.dump(ids, open(out_path, "w"))
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "train":
        train(*sys.argv[2:5])
    else:
        sys.exit(encode(*sys.argv[2:5]))

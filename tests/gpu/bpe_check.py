#!/usr/bin/env python3
"""The tokenizers library's side of tests/gpu/test_gpu_tokenizers.cpp (tools/bpe_check.cjs is the
same through the library's Node binding, for machines without this one).

  bpe_check.py train CORPUS DIR gpt2|llama3   trains a byte-level BPE of that family's kind on the
                                              text file CORPUS (vocabulary 2000) and writes
                                              DIR/tokenizer.json and DIR/tokenizer_config.json
  bpe_check.py encode TOKENIZER TEXTS OUT     encodes each text of the JSON list TEXTS with the
                                              tokenizer.json TOKENIZER (no special tokens added,
                                              special tokens in the text split as text, no
                                              truncation) and writes the ids to OUT as a JSON list
  bpe_check.py pretokenize TOKENIZER TEXTS OUT  each text's words as the pre-tokenizer cuts them,
                                              joined by spaces, to OUT as a JSON list
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
    tok.encode_special_tokens = True  # transformers' split_special_tokens=True
    texts = json.load(open(texts_path, encoding="utf-8"))
    json.dump([e.ids for e in tok.encode_batch(texts, add_special_tokens=False)], open(out_path, "w"))


def pretokenize(path, texts_path, out_path):
    pre = Tokenizer.from_file(path).pre_tokenizer
    texts = json.load(open(texts_path, encoding="utf-8"))
    json.dump([" ".join(w for w, _ in pre.pre_tokenize_str(t)) for t in texts], open(out_path, "w"))


if __name__ == "__main__":
    {"train": train, "encode": encode, "pretokenize": pretokenize}[sys.argv[1]](*sys.argv[2:5])

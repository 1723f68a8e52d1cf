#!/usr/bin/python3
"""The ids Hugging Face's JavaScript tokenizers (npm @huggingface/transformers
and @huggingface/tokenizers, tools/npm_tokenizers/) give 2,000 Multi30k
sentences (val and test_2017_flickr, German and English) on the NLLB and
M2M100 fixtures' tokenizer.json: the independent reference that
test/pgtap/25_checkpoints.sql compares our C tokenizer with, id for id.

    (cd tools/npm_tokenizers && npm install)
    /usr/bin/python3 tools/gen_npm_token_ids.py

Writes test/fixtures/npm_tokens/<fixture>.json: [{"text", "src_lang", "ids"}],
ids as the npm package encodes them (language token and </s> included).
"""
import gzip
import json
import os
import subprocess
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DATA = os.path.join(ROOT, "..", "shared", "data", "multi30k")
OUT = os.path.join(ROOT, "test", "fixtures", "npm_tokens")
FIXTURES = {"nllb_tiny": ("deu_Latn", "eng_Latn"), "m2m100_tiny": ("de", "en")}


def lines(name):
    with gzip.open(os.path.join(DATA, name), "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f][:500]


def main():
    sentences = [(s, 0) for s in lines("val.de.gz") + lines("test_2017_flickr.de.gz")] + \
                [(s, 1) for s in lines("val.en.gz") + lines("test_2017_flickr.en.gz")]
    os.makedirs(OUT, exist_ok=True)
    for fixture, langs in FIXTURES.items():
        inputs = {"encode": [{"text": s, "src_lang": langs[k], "tgt_lang": langs[1 - k]} for s, k in sentences],
                  "decode": []}
        with tempfile.TemporaryDirectory() as tmp:
            inp, outp = os.path.join(tmp, "in.json"), os.path.join(tmp, "out.json")
            with open(inp, "w", encoding="utf-8") as f:
                json.dump(inputs, f, ensure_ascii=False)
            subprocess.run(["node", os.path.join(ROOT, "tools", "npm_tokenizers", "tokenize.mjs"),
                            os.path.join(ROOT, "test", "fixtures", "checkpoints", fixture), inp, outp], check=True)
            with open(outp, encoding="utf-8") as f:
                got = json.load(f)
        rows = [{"text": e["text"], "src_lang": e["src_lang"], "ids": g["ids"]}
                for e, g in zip(inputs["encode"], got["encode"])]
        with open(os.path.join(OUT, fixture + ".json"), "w", encoding="utf-8") as f:
            f.write("[\n" + ",\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n]\n")
        print(fixture, len(rows), "sentences;", got.get("versions"))


if __name__ == "__main__":
    main()

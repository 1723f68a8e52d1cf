#!/usr/bin/python3
"""Model directories import_model() must refuse, each with a clear error
(test/pgtap/25_checkpoints.sql), in test/fixtures/bad_checkpoints/: hostile and unsupported pytorch_model.bin
files (from tools/gen_torch_fixtures.py's test/fixtures/torch/), layouts of
other frameworks, an unknown model_type, missing vocabularies and language
tokens, a broken shard index.  Weights and tokenizers are symbolic links to
the fixtures of tools/gen_checkpoint_fixtures.py.

    /usr/bin/python3 tools/gen_bad_checkpoints.py
"""
import json
import os
import shutil

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FX = os.path.join(ROOT, "test", "fixtures")
OUT = os.path.join(FX, "bad_checkpoints")


def config(name):
    with open(os.path.join(FX, "checkpoints", name, "config.json")) as f:
        return json.load(f)


def make(d, cfg, files=(), links=(), extra=None):
    path = os.path.join(OUT, d)
    os.makedirs(path)
    if cfg is not None:
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
    for name, src in files:
        shutil.copyfile(src, os.path.join(path, name))
    # copies, not symlinks: import_model() refuses a file whose real path
    # lies outside the model's directory (git stores identical files once)
    for name, target in links:
        shutil.copyfile(os.path.join(path, target), os.path.join(path, name))
    for name, text in (extra or {}).items():
        with open(os.path.join(path, name), "w") as f:
            f.write(text)


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    nllb = config("nllb_tiny")
    marian = config("marian_multi")
    torch_fx = os.path.join(FX, "torch")
    # pickles that name what a state dict never needs, or hold what we do not read
    for name in ("hostile_system", "hostile_eval", "hostile_popen", "hostile_getattr", "hostile_legacy",
                 "noncontig", "dtypes", "tar", "deflated"):
        make(name, nllb, files=[("pytorch_model.bin", os.path.join(torch_fx, name + ".pt"))])
    make("tf_only", nllb, extra={"tf_model.h5": ""})
    make("flax_only", nllb, extra={"flax_model.msgpack": ""})
    make("no_weights", nllb)
    make("no_config", None, links=[("model.safetensors", "../../checkpoints/nllb_tiny/model.safetensors")])
    make("t5", dict(nllb, model_type="t5"))
    make("no_vocab", marian, links=[("pytorch_model.bin", "../../checkpoints/marian_multi/pytorch_model.bin"),
                                    ("source.spm", "../../checkpoints/marian_multi/source.spm"),
                                    ("target.spm", "../../checkpoints/marian_multi/target.spm")])
    make("no_languages", nllb, links=[("model.safetensors", "../../checkpoints/nllb_tiny/model.safetensors"),
                                      ("sentencepiece.bpe.model", "../../checkpoints/nllb_tiny/sentencepiece.bpe.model")],
         extra={"tokenizer_config.json": json.dumps({"tokenizer_class": "NllbTokenizer"})})
    # an index that lists a weight its shard does not hold
    with open(os.path.join(FX, "checkpoints", "m2m100_tiny", "model.safetensors.index.json")) as f:
        index = json.load(f)
    index["weight_map"]["model.encoder.extra.weight"] = "model-00001-of-00002.safetensors"
    make("index_extra", config("m2m100_tiny"),
         links=[(s, "../../checkpoints/m2m100_tiny/" + s) for s in sorted(set(index["weight_map"].values()))],
         extra={"model.safetensors.index.json": json.dumps(index)})
    index["weight_map"] = {k: "../nllb_tiny/model.safetensors" for k in index["weight_map"]}
    make("index_escape", config("m2m100_tiny"), extra={"model.safetensors.index.json": json.dumps(index)})


if __name__ == "__main__":
    main()

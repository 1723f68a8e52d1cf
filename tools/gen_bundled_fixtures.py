#!/usr/bin/python3
"""Expected translations of the bundled model (make fixtures).

For a handful of German sentences (written for this test, not from the
Multi30k test sets), the bundled model's translations as PyTorch decodes the
same weights (tools/marian_torch.py: Hugging Face's generate() rules),
greedy and with beam 4; and for the first validation sentences on which
beam search differs from greedy search, the ids of every option set of
DECODE; into test/fixtures/bundled_multi30k_de_en.json.
test/pgtap/07_bundled_model.sql checks that SQL gives the same.
"""
import gzip
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import marian_torch as mt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "models", "multi30k_de_en")
OUT = os.path.join(ROOT, "test", "fixtures", "bundled_multi30k_de_en.json")

VAL = os.path.join(os.path.dirname(ROOT), "shared", "data", "multi30k", "val.de.gz")
DECODE = [
    {"num_beams": 1}, {}, {"num_beams": 5}, {"num_beams": 4, "length_penalty": 0.6},
    {"num_beams": 4, "length_penalty": 2.0}, {"num_beams": 4, "early_stopping": True},
    {"num_beams": 4, "no_repeat_ngram_size": 2}, {"num_beams": 1, "no_repeat_ngram_size": 2},
    {"num_beams": 4, "repetition_penalty": 1.5}, {"num_beams": 1, "repetition_penalty": 1.5},
    {"num_beams": 4, "min_length": 20}, {"num_beams": 4, "max_new_tokens": 6},
    {"num_beams": 5, "max_length": 9},
]
N_SEARCH = 8

SENTENCES = [
    "Ein Mann fährt mit dem Fahrrad durch die Stadt.",
    "Zwei Kinder spielen im Sand am Strand.",
    "Eine Frau mit einem roten Hut liest ein Buch.",
    "Ein Hund rennt über eine grüne Wiese.",
    "Mehrere Menschen stehen vor einem Gebäude und warten.",
    "Ein kleines Mädchen isst ein Eis.",
    "Ein Mann in einem blauen Hemd spielt Gitarre.",
    "Eine Gruppe von Leuten sitzt an einem Tisch.",
]


def main():
    torch.set_num_threads(1)
    t = mt.Translator(MODEL)
    cases = []
    for s in SENTENCES:
        cases.append({"de": s, "greedy": t.translate(s, 1), "beam4": t.translate(s, 4)})
        print("%s\n  greedy: %s\n  beam 4: %s" % (s, cases[-1]["greedy"], cases[-1]["beam4"]))
    # validation sentences where the search rules matter: beam 4 differs from greedy
    search = []
    with gzip.open(VAL, "rt", encoding="utf-8") as f:
        val = f.read().split("\n")[:-1]
    for s in val:
        src = t.source_ids(s)
        g = mt.generate(t.model, src, t.gen, num_beams=1)
        b = mt.generate(t.model, src, t.gen, num_beams=4)
        if g != b:
            search.append({"de": s, "decode": [{"options": o, "ids": mt.generate(t.model, src, t.gen, **o)} for o in DECODE]})
            print("search case: %s\n  lengths %s" % (s, [len(d["ids"]) for d in search[-1]["decode"]]))
            if len(search) == N_SEARCH:
                break
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump({"sentences": cases, "search": search}, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()

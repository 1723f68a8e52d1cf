#!/usr/bin/python3
"""Expected translations of the bundled model (make fixtures).

For a handful of German sentences (written for this test, not from the
Multi30k test sets), the bundled model's translations as PyTorch decodes the
same weights (tools/marian_torch.py), greedy and with beam 4, into
test/fixtures/bundled_multi30k_de_en.json; test/pgtap/07_bundled_model.sql
checks that SQL translate() gives the same.
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import marian_torch as mt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "models", "multi30k_de_en")
OUT = os.path.join(ROOT, "test", "fixtures", "bundled_multi30k_de_en.json")

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
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()

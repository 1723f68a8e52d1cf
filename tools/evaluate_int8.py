#!/usr/bin/python3
"""What int8 costs in quality, measured through SQL (issue 14).

  pg_virtualenv /usr/bin/python3 tools/evaluate_int8.py [--beam 4] [--splits test_2016_flickr,test_2017_flickr]

- the bundled model (import_model('multi30k_de_en')) and its int8 copy
  (quantize_model('multi30k_de_en', 'multi30k_de_en_int8')), both in SQL;
- for each Multi30k test split: SELECT translate(body, model, beam) with
  each, corpus BLEU (sacreBLEU's 13a tokenization, tools/bleu.py) of both,
  their difference, and the share of sentences whose int8 translation is
  identical to the original's.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bleu import corpus_bleu  # noqa: E402
import evaluate as ev  # noqa: E402

INT8 = ev.MODEL + "_int8"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--splits", default="test_2016_flickr,test_2017_flickr")
    args = ap.parse_args()
    ev.psql("""
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS transformer;
SELECT import_model('%(m)s') WHERE NOT EXISTS (SELECT FROM transformer_models WHERE name = '%(m)s') \\g /dev/null
SELECT quantize_model('%(m)s', '%(q)s') WHERE NOT EXISTS (SELECT FROM transformer_models WHERE name = '%(q)s') \\g /dev/null
""" % dict(m=ev.MODEL, q=INT8))
    print("| split | sentences | BLEU fp32 | BLEU int8 | difference | int8 identical to fp32 |")
    print("|---|---|---|---|---|---|")
    worst = 0.0
    for split in args.splits.split(","):
        refs = ev.read(split, "en")
        t0 = time.time()
        base = ev.sql_translate(split, args.beam, model=ev.MODEL)
        t1 = time.time()
        q = ev.sql_translate(split, args.beam, model=INT8)
        t2 = time.time()
        assert len(base) == len(q) == len(refs)
        b0, b1 = corpus_bleu(base, [refs]), corpus_bleu(q, [refs])
        same = sum(a == b for a, b in zip(base, q))
        worst = max(worst, b0 - b1)
        print("| %s | %d | %.2f | %.2f | %+.2f | %d (%.1f%%) |"
              % (split, len(refs), b0, b1, b1 - b0, same, 100.0 * same / len(refs)))
        print("  (beam %d; %.0f s fp32, %.0f s int8 through SQL)" % (args.beam, t1 - t0, t2 - t1),
              file=sys.stderr)
    print("largest BLEU loss: %.2f (target <= 0.3)" % worst)
    return 0 if worst <= 0.3 else 1


if __name__ == "__main__":
    sys.exit(main())

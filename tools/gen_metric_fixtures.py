#!/usr/bin/python3
"""Expected corpus BLEU and chrF for test/pgtap/16_metrics.sql (make fixtures):
tools/bleu.py's corpus_bleu (sacreBLEU's defaults) and corpus_chrf on
 - test/fixtures/metrics/synthetic.json: hand-written pairs for the hard
   cases of 13a tokenization and counting (empty and one-word lines,
   punctuation, numbers, HTML entities, <skipped>, Unicode spaces,
   multibyte characters), corpus-wide and per line;
 - the bundled model's beam-4 translations of test_2016_flickr
   (multi30k_test_2016_beam4.txt) against the references in
   ../shared/data (read there, not copied).
"""
import gzip
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bleu import corpus_bleu, corpus_chrf  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIR = os.path.join(ROOT, "test", "fixtures", "metrics")
REFS = os.path.join(os.path.dirname(ROOT), "shared", "data", "multi30k", "test_2016_flickr.en.gz")

PAIRS = [
    ("The cat sat on the mat.", "The cat sat on the mat."),
    ("A dog runs.", "The dog is running."),
    ("", "Nothing came out."),
    ("word", "word"),
    ("word", ""),
    ("It costs 3.50 dollars, or 3,50 euros.", "It costs 3.50 dollars or 3,50 euros."),
    ("Well... that's it!", "Well ... that is it !"),
    ("Tom &amp; Jerry &lt;3 &quot;cheese&quot;", "Tom & Jerry <3 \"cheese\""),
    ("A 10-year-old boy <skipped> plays.", "A ten-year-old boy plays."),
    ("non\u00a0breaking\u3000spaces here", "non breaking spaces here"),
    ("Müller’s café — naïve façade.", "Müller's café - naive facade."),
    ("(a) [b] {c} $d% ^e_ `f` ~g| h@i", "(a) [b] {c} $d% ^e_ `f` ~g| h@i"),
    ("Hello, world.Next sentence,no space", "Hello, world. Next sentence, no space"),
    ("line-\nbreak and\nnewline", "linebreak and newline"),
    ("日本語のテキスト。", "日本語の文章。"),
    ("a a a a a a", "a a a"),
    ("Version v.2 has x,3 items and 4-5 more.", "Version v . 2 has x , 3 items and 4 - 5 more ."),
    ("End.2 and 2.End, 7-eleven", "End . 2 and 2 . End , 7 - eleven"),
]


def main():
    hyps, refs = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
    out = {
        "pairs": [{"hyp": h, "ref": r, "bleu": corpus_bleu([h], [[r]]), "chrf": corpus_chrf([h], [r])} for h, r in PAIRS],
        "bleu": corpus_bleu(hyps, [refs]),
        "chrf": corpus_chrf(hyps, refs),
    }
    if os.path.exists(REFS):
        with open(os.path.join(DIR, "multi30k_test_2016_beam4.txt"), encoding="utf-8") as f:
            mh = f.read().split("\n")[:-1]
        with gzip.open(REFS, "rt", encoding="utf-8") as f:
            mr = f.read().split("\n")[:-1]
        out["multi30k_test_2016_beam4"] = {"bleu": corpus_bleu(mh, [mr]), "chrf": corpus_chrf(mh, mr)}
    with open(os.path.join(DIR, "synthetic.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
    print(json.dumps({k: v for k, v in out.items() if k != "pairs"}))


if __name__ == "__main__":
    main()

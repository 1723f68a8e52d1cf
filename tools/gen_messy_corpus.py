#!/usr/bin/python3
"""Messy lines for "no character lost in silence" (issue 38).

German captions from Multi30k's test 2016 (which the bundled model never
saw), decorated as text in tables is: emoji (with skin tones and joiners),
currency, math, arrows, CJK inside German, bullets and numbered lists,
hashtags and order numbers, HTML entities written as text, quotes and
other symbols.  Deterministic (seeded); writes test/fixtures/messy_lines.txt,
one input per line, with "\\n" standing for a line break inside an input.
And test/fixtures/messy_dropped.txt: per line, the characters of its
caption (not letters or spaces, once per copy of the caption in the line)
that the human reference translation (test_2016_flickr.en) has fewer of,
such as the commas of German relative clauses: a translation that drops
them drops what a translator drops, and the test counts them apart.
Also test/fixtures/caps_lines.txt: the first 150 captions of test 2017, for
the ALL CAPS share (the test upper-cases them).

    tools/gen_messy_corpus.py [../shared/data/multi30k]
"""
import collections
import gzip
import random
import sys

DECORATIONS = [
    lambda s, r: s.replace(".", " " + r.choice(["😀", "👍🏽", "❤️", "🐕", "🎉", "👨‍👩‍👧", "☀️"]) + ".", 1),
    lambda s, r: r.choice(["😀 ", "🔥 ", "✨ "]) + s,
    lambda s, r: s.rstrip(".") + " für " + r.choice(["5 €", "$3.99", "£20", "¥100", "12,50 €", "€ 8"]) + ".",
    lambda s, r: s.rstrip(".") + " " + r.choice(["(± 2 m)", "× 3", "≈ 40 %", "≤ 5 km", "√2", "°C"]) + ".",
    lambda s, r: s.replace(" ", " → ", 1),
    lambda s, r: s.rstrip(".") + " " + r.choice(["(日本)", "「東京」", "中文", "한국"]) + ".",
    lambda s, r: "- " + s + "\\n- " + s,
    lambda s, r: "• " + s,
    lambda s, r: "1. " + s + "\\n2. " + s,
    lambda s, r: s.rstrip(".") + " " + r.choice(["#Hund", "#Berlin2024", "#4711", "Nr. #12"]) + ".",
    lambda s, r: s.rstrip(".") + " " + r.choice(["&lt;3", "&amp;", "&#169;", "&gt;"]) + ".",
    lambda s, r: "„" + s.rstrip(".") + "“ " + r.choice(["©", "®", "™", "§ 3", "★★★", "♥"]),
]


def marks(s):
    """The characters that are not letters or spaces, counted (the test's [[:alpha:][:space:]])."""
    return collections.Counter(c for c in s if not (c.isalpha() or c.isspace()))


def main():
    data = sys.argv[1] if len(sys.argv) > 1 else "../shared/data/multi30k"
    lines = [l.strip() for l in gzip.open(data + "/test_2016_flickr.de.gz", "rt", encoding="utf-8")]
    refs = [l.strip() for l in gzip.open(data + "/test_2016_flickr.en.gz", "rt", encoding="utf-8")]
    r = random.Random(38)
    out = []
    dropped = []
    for i, s in enumerate(lines[:240]):
        if not s.endswith("."):
            s += "."
        caption = s
        d = DECORATIONS[i % len(DECORATIONS)]
        s = d(s, r)
        if i % 3 == 0:
            s = DECORATIONS[(i * 7 + 5) % len(DECORATIONS)](s, r)
        out.append(s)
        ref = refs[i] if refs[i].endswith(".") else refs[i] + "."
        copies = max(1, s.count(caption.rstrip(".")))
        cc, cr = marks(caption), marks(ref)
        dropped.append("".join(c * (copies * (cc[c] - cr[c])) for c in sorted(cc) if cc[c] > cr[c]))
    with open("test/fixtures/messy_lines.txt", "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    with open("test/fixtures/messy_dropped.txt", "w", encoding="utf-8") as f:
        f.write("\n".join(dropped) + "\n")
    print("test/fixtures/messy_lines.txt: %d lines" % len(out))
    caps = [l.strip() for l in gzip.open(data + "/test_2017_flickr.de.gz", "rt", encoding="utf-8")][:150]
    with open("test/fixtures/caps_lines.txt", "w", encoding="utf-8") as f:
        f.write("\n".join(caps) + "\n")
    print("test/fixtures/caps_lines.txt: %d lines" % len(caps))


if __name__ == "__main__":
    main()

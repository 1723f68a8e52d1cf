#!/usr/bin/python3
"""Fixtures of text as people write it (issue 27), from Multi30k test 2016.

Writes test/fixtures/text/text_cases.json:
  paragraph:  20 consecutive German sentences, as written and with every
              final period taken out (one line, run on);
  words600:   the first 600 words of the test set with all punctuation
              taken out;
  runon10k:   about 10 kB of the test set without punctuation, one line;
  html40:     40 sentences with one word in <b>, and the plain sentence.
Deterministic: the same data give the same file.

  /usr/bin/python3 tools/gen_text_fixtures.py [../shared/data/multi30k]
"""
import gzip
import json
import os
import random
import re
import sys

data = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "multi30k")
with gzip.open(os.path.join(data, "test_2016_flickr.de.gz"), "rt", encoding="utf-8") as f:
    de = [l.strip() for l in f]

def unpunct(s):
    return re.sub(r"[.,;:!?\"„“]", "", s).strip()

para = de[0:20]
words = " ".join(unpunct(s) for s in de).split()
runon = []
size = 0
for s in de[200:]:
    u = unpunct(s)
    if size + len(u.encode()) + 1 > 10000:
        break
    runon.append(u)
    size += len(u.encode()) + 1

rng = random.Random(27)
html = []
for s in de[100:140]:
    ws = s.split(" ")
    cand = [i for i, w in enumerate(ws) if re.fullmatch(r"\w+", w)]
    i = rng.choice(cand)
    ws2 = list(ws)
    ws2[i] = "<b>" + ws[i] + "</b>"
    html.append({"plain": s, "html": "<p>" + " ".join(ws2) + "</p>"})

out = {
    "source": "Multi30k test_2016_flickr.de (tools/gen_text_fixtures.py)",
    "paragraph": {"punctuated": " ".join(para), "unpunctuated": " ".join(re.sub(r"\.$", "", s) for s in para)},
    "words600": " ".join(words[:600]),
    "runon10k": " ".join(runon),
    "html40": html,
}
path = os.path.join(os.path.dirname(__file__), "..", "test", "fixtures", "text", "text_cases.json")
with open(path, "w", encoding="utf-8") as f:
    json.dump(out, f, ensure_ascii=False, indent=1)
    f.write("\n")
print("wrote", path)

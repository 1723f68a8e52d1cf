#!/usr/bin/python3
"""The quality table of text as people write it (issue 27), re-measured.

Runs each row of the table of docs/text.md through translate() with the bundled
model, in a database where the extension can be created (PGHOST etc., as
psql; e.g. under pg_virtualenv), and prints a Markdown table plus the
figures: words kept for the paragraph without periods, characters out for
600 words without punctuation, the 10 kB run-on text, and the share of the
40 HTML sentences (test/fixtures/text) whose text equals translate() of
the plain sentence.

  pg_virtualenv -t /usr/bin/python3 tools/text_quality.py [--model NAME]
"""
import json
import os
import re
import sys

import psycopg2

MODEL = "multi30k_de_en"
if "--model" in sys.argv:
    MODEL = sys.argv[sys.argv.index("--model") + 1]
here = os.path.dirname(os.path.abspath(__file__))
cases = json.load(open(os.path.join(here, "..", "test", "fixtures", "text", "text_cases.json"), encoding="utf-8"))

conn = psycopg2.connect("")
conn.autocommit = True
cur = conn.cursor()
cur.execute("CREATE EXTENSION IF NOT EXISTS transformer")
cur.execute("SELECT count(*) FROM transformer_models WHERE name = %s", (MODEL,))
if cur.fetchone()[0] == 0:
    cur.execute("SELECT import_model(%s)", (MODEL,))


def tr(s, **opt):
    args = "".join(", %s => %%(%s)s" % (k, k) for k in opt)
    cur.execute("SELECT translate(%(s)s, %(m)s" + args + ")", dict(s=s, m=MODEL, **opt))
    return cur.fetchone()[0]


def words(s):
    return len(s.split())


rows = [
    ("a caption in ALL CAPS", "EIN MANN FÄHRT MIT DEM FAHRRAD DURCH DIE STADT.", {}),
    ("a headline in Title Case", "Zwei Hunde Spielen Im Schnee", {}),
    ("markup", "<p>Ein Mann fährt <b>Fahrrad</b>.</p>", {"format": "html"}),
    ("a URL and an e-mail address", "Ein Mann besucht https://example.org/hunde und schreibt an anna@example.org.", {}),
    ("a date with digits", "Am 15. März 2024 spielen zwei Hunde im Park.", {}),
    ("periods after numbers and abbreviations", "Am 3. Oktober spielen Kinder im Schnee. Ca. 20 Leute stehen auf der Straße.", {}),
]
print("| input | output |")
print("|---|---|")
for name, src, opt in rows:
    out = tr(src, **opt)
    print("| %s: `%s` | `%s` |" % (name, src, out))

p = cases["paragraph"]
full = tr(p["punctuated"])
cut = tr(p["unpunctuated"])
print()
cur.execute("SELECT chrf(%s, %s), bleu(%s, %s)", (cut, full, cut, full))
chrf, bleu = cur.fetchone()
print("20 sentences without final periods: %d words, %d for the punctuated paragraph: %.0f%% kept; "
      "against its translation chrF %.1f, BLEU %.1f" % (words(cut), words(full), 100.0 * min(words(cut), words(full)) / words(full), chrf, bleu))
if "--compare" in sys.argv:
    other = open(sys.argv[sys.argv.index("--compare") + 1], encoding="utf-8").read().strip()
    cur.execute("SELECT chrf(%s, %s), bleu(%s, %s)", (other, full, other, full))
    print("  the text in %s: %d words, chrF %.1f, BLEU %.1f" % (sys.argv[sys.argv.index("--compare") + 1], words(other), *cur.fetchone()))
w600 = tr(cases["words600"])
print("600 words without punctuation: %d characters, %d words out" % (len(w600), words(w600)))
r10 = tr(cases["runon10k"])
glued = re.findall(r"\w[.!?][A-Z]", r10)
print("10 kB run-on text (%d bytes): %d characters, %d words out; chunks glued: %d"
      % (len(cases["runon10k"].encode()), len(r10), words(r10), len(glued)))

same = 0
for c in cases["html40"]:
    h = tr(c["html"], format="html")
    plain = tr(c["plain"])
    text = re.sub(r"<[^>]*>", "", h)
    if text == "<p>".join([""]) + plain or text == plain:
        same += 1
print("HTML: %d/40 sentences with one word in <b> give the text of translate() of the plain sentence" % same)

#!/usr/bin/python3
"""Domain adaptation with fine_tune(): a translation memory in a house style (issue 41).

  pg_virtualenv /usr/bin/python3 tools/domain_demo.py [--epochs 3] [--rate 1e-4]

The domain: British English.  A company's approved translations use its
house style (colour, grey, centre, theatre, pavement, lorry, trousers,
football, film, ...), which the bundled model, trained on Multi30k's
American English, does not.  Multi30k has no such corpus, so this script
makes one from it, and says so: the English side of every pair that has
one of the American words below is rewritten in the house style (a fixed
word list, whole words, case kept).

- in-domain training pairs: those of Multi30k's training set (2,685 of
  29,000), in a table, the translation memory;
- held out: those of val, test_2016 and test_2017 (274 pairs), never
  trained on;
- fine_tune('multi30k_de_en', 'multi30k_british', 'SELECT de, en FROM
  memory', ...): BLEU (13a, beam 4, through SQL translate()) on the held-out
  pairs against their house-style references, before and after, and how
  many of the house-style words of the references the outputs have; and
  BLEU on all of test_2016 against its original references, for what the
  style costs elsewhere.
"""
import argparse
import gzip
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bleu import corpus_bleu  # noqa: E402
import evaluate  # noqa: E402

# whole words, lower case; ambiguous ones (fall, line, tire) left out
HOUSE = {"gray": "grey", "grays": "greys", "grayish": "greyish", "color": "colour", "colors": "colours",
         "colored": "coloured", "colorful": "colourful", "center": "centre", "centers": "centres",
         "theater": "theatre", "favorite": "favourite", "neighbor": "neighbour", "neighborhood": "neighbourhood",
         "jewelry": "jewellery", "pajamas": "pyjamas", "airplane": "aeroplane", "airplanes": "aeroplanes",
         "tires": "tyres", "aluminum": "aluminium", "mom": "mum", "sidewalk": "pavement", "sidewalks": "pavements",
         "soccer": "football", "cookie": "biscuit", "cookies": "biscuits", "truck": "lorry", "trucks": "lorries",
         "stroller": "pushchair", "diaper": "nappy", "pants": "trousers", "sweater": "jumper", "sweaters": "jumpers",
         "elevator": "lift", "gasoline": "petrol", "parking lot": "car park", "french fries": "chips",
         "candy": "sweets", "trash": "rubbish", "vacation": "holiday", "cell phone": "mobile phone",
         "movie": "film", "movies": "films"}
PATTERN = re.compile(r"\b(%s)\b" % "|".join(sorted(map(re.escape, HOUSE), key=len, reverse=True)), re.I)


def house(s):
    def sub(m):
        w = HOUSE[m.group(0).lower()]
        return w[0].upper() + w[1:] if m.group(0)[0].isupper() else w
    return PATTERN.sub(sub, s)


def lines(split, lang):
    with gzip.open(os.path.join(evaluate.DATA, "%s.%s.gz" % (split, lang)), "rt", encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def in_domain(split):
    return [(d, house(e)) for d, e in zip(lines(split, "de"), lines(split, "en")) if PATTERN.search(e)]


def literal(s):
    return "'" + s.replace("'", "''") + "'"


def translate_all(model, texts):
    out = evaluate.psql("SET client_min_messages = warning;\n\\pset recordsep '\\x1e'\n" +
                        "SELECT translate(t, %s, 4) FROM unnest(ARRAY[%s]::text[]) WITH ORDINALITY u(t, n) ORDER BY n;\n"
                        % (literal(model), ",".join(literal(t) for t in texts)))
    return out.rstrip("\n").split("\x1e")


def house_words(text):
    return [w.lower() for w in re.findall(r"\b(%s)\b" % "|".join(map(re.escape, set(HOUSE.values()))), text, re.I)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rate", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--average", type=int, default=1)
    args = ap.parse_args()

    train = in_domain("train")
    held = in_domain("val") + in_domain("test_2016_flickr") + in_domain("test_2017_flickr")
    print("translation memory: %d pairs; held out: %d pairs" % (len(train), len(held)), flush=True)
    evaluate.psql("SET client_min_messages = warning;\nCREATE EXTENSION IF NOT EXISTS transformer;\n"
                  "SELECT import_model('multi30k_de_en') WHERE NOT EXISTS (SELECT FROM transformer_models "
                  "WHERE name = 'multi30k_de_en');\nDROP TABLE IF EXISTS memory;\n"
                  "CREATE TABLE memory (n serial PRIMARY KEY, de text, en text);\n" +
                  "".join("INSERT INTO memory (de, en) VALUES (%s, %s);\n" % (literal(d), literal(e)) for d, e in train) +
                  "SELECT drop_model('multi30k_british') WHERE EXISTS (SELECT FROM transformer_models "
                  "WHERE name = 'multi30k_british');\n")
    call = ("SELECT fine_tune('multi30k_de_en', 'multi30k_british', 'SELECT de, en FROM memory ORDER BY n', "
            "epochs => %d, batch_size => %d, learning_rate => %g, warmup_steps => %d, average_last => %d)"
            % (args.epochs, args.batch, args.rate, args.warmup, args.average))
    print(call, flush=True)
    t0 = time.time()
    job = int(evaluate.psql(call).strip())
    evaluate.psql("SELECT wait_for_job(%d);" % job)
    print(evaluate.psql("SELECT format('job %%s: %%s steps, %%s tokens, %%s s training', job, count(*), sum(tokens), "
                        "round(sum(seconds)::numeric, 1)) FROM transformer_job_steps WHERE job = %d GROUP BY job;"
                        % job).strip(), "(%.1f minutes in all)" % ((time.time() - t0) / 60), flush=True)
    refs = [e for _, e in held]
    want = sum(len(house_words(r)) for r in refs)
    for model in ("multi30k_de_en", "multi30k_british"):
        hyps = translate_all(model, [d for d, _ in held])
        got = sum(min(house_words(h).count(w), house_words(r).count(w))
                  for h, r in zip(hyps, refs) for w in set(house_words(r)))
        print("%-18s held-out house style: BLEU %.2f, house words %d of %d"
              % (model, corpus_bleu(hyps, [refs]), got, want), flush=True)
    refs16 = lines("test_2016_flickr", "en")
    for model in ("multi30k_de_en", "multi30k_british"):
        hyps = evaluate.sql_translate("test_2016_flickr", 4, model=model)
        print("%-18s test_2016, original references: BLEU %.2f" % (model, corpus_bleu(hyps, [refs16])), flush=True)


if __name__ == "__main__":
    main()

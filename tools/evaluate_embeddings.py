#!/usr/bin/python3
"""Cross-lingual retrieval with SQL embed(): the sentence encoder's figure.

  pg_virtualenv /usr/bin/python3 tools/evaluate_embeddings.py [--model multi30k_sentence_de_en]
                [--splits test_2016_flickr,test_2017_flickr] [--int8] [--torch] [--translation]

For each test set (1,000 German-English pairs of Multi30k): embed every
German and every English sentence through SQL embed() (the batch form),
then for each German sentence, is its English translation the nearest of
all English sentences by cosine (top-1), and the other way round.

- loads the bundled model (import_model(name)) unless it is there;
- --int8: the same with quantize_model()'s int8 copy (its retrieval cost);
- --torch: the same vectors from tools/bert_torch.py (the PyTorch port) on
  the model's own files, and the largest difference from ours;
- --translation: the bundled translation model's mean-pooled encoder (what
  embed() gives on a translation model), as a baseline.
"""
import argparse
import gzip
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(os.path.dirname(ROOT), "shared", "data", "multi30k")


def read(split, lang):
    with gzip.open(os.path.join(DATA, "%s.%s.gz" % (split, lang)), "rt", encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def psql(sql):
    return subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"], input=sql,
                          capture_output=True, text=True, check=True).stdout


def sql_vectors(model, bundled, path):
    """embed() of every line of a gzip file, in order, as a numpy matrix."""
    out = psql("""
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS transformer;
SELECT import_model('%(b)s') WHERE NOT EXISTS (SELECT FROM transformer_models WHERE name = '%(b)s') \\g /dev/null
CREATE TEMP TABLE docs (n serial, body text);
\\copy docs(body) FROM PROGRAM 'zcat %(path)s' WITH (FORMAT csv, QUOTE E'\\x01', DELIMITER E'\\x02', NULL E'\\x03')
SELECT e FROM embed((SELECT array_agg(body ORDER BY n) FROM docs), '%(m)s') WITH ORDINALITY AS t(e, k) ORDER BY k;
""" % dict(m=model, b=bundled, path=path))
    rows = [r for r in out.split("\n") if r]
    return np.array([[float(x) for x in r.strip("{}").split(",")] for r in rows], dtype=np.float64)


def retrieval(de, en):
    """top-1 de->en and en->de, by cosine."""
    de = de / np.linalg.norm(de, axis=1, keepdims=True)
    en = en / np.linalg.norm(en, axis=1, keepdims=True)
    s = de @ en.T
    gold = np.arange(len(de))
    return (s.argmax(1) == gold).mean() * 100, (s.argmax(0) == gold).mean() * 100


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="multi30k_sentence_de_en")
    ap.add_argument("--splits", default="test_2016_flickr,test_2017_flickr")
    ap.add_argument("--int8", action="store_true")
    ap.add_argument("--torch", action="store_true")
    ap.add_argument("--translation", action="store_true")
    a = ap.parse_args()
    bundled = a.model
    models = [a.model]
    if a.int8:
        psql("""SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS transformer;
SELECT import_model('%(m)s') WHERE NOT EXISTS (SELECT FROM transformer_models WHERE name = '%(m)s') \\g /dev/null
SELECT quantize_model('%(m)s', '%(m)s_i8') WHERE NOT EXISTS (SELECT FROM transformer_models WHERE name = '%(m)s_i8') \\g /dev/null
""" % dict(m=a.model))
        models.append(a.model + "_i8")
    if a.translation:
        models.append("multi30k_de_en")
    results = {}
    for split in a.splits.split(","):
        for m in models:
            b = "multi30k_de_en" if m == "multi30k_de_en" else bundled
            de = sql_vectors(m, b, os.path.join(DATA, split + ".de.gz"))
            en = sql_vectors(m, b, os.path.join(DATA, split + ".en.gz"))
            r = retrieval(de, en)
            results[(split, m)] = r
            print("%-18s %-28s de->en top-1 %5.1f%%   en->de top-1 %5.1f%%   (%d pairs)"
                  % (split, m, r[0], r[1], len(de)))
            if a.torch and m == a.model:
                sys.path.insert(0, HERE)
                import torch
                import bert_torch as bt
                torch.set_num_threads(1)
                model = bt.load_encoder(os.path.join(ROOT, "models", a.model))
                with torch.inference_mode():
                    tde = bt.encode_texts(model, read(split, "de"))[1].double().numpy()
                    ten = bt.encode_texts(model, read(split, "en"))[1].double().numpy()
                rt = retrieval(tde, ten)
                print("%-18s %-28s de->en top-1 %5.1f%%   en->de top-1 %5.1f%%   largest difference from SQL %.2e"
                      % (split, "PyTorch port", rt[0], rt[1], max(np.abs(tde - de).max(), np.abs(ten - en).max())))
    print(json.dumps({"%s %s" % k: v for k, v in results.items()}))


if __name__ == "__main__":
    main()

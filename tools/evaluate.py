#!/usr/bin/python3
"""Translate a Multi30k test set through SQL translate() and score it.

  pg_virtualenv /usr/bin/python3 tools/evaluate.py [--split test_2016_flickr] [--beam 4] [--set NAME=VALUE]

- loads the bundled model (SELECT import_model('multi30k_de_en')) unless it
  is there, puts the German test sentences in a table and runs
  SELECT translate(body, 'multi30k_de_en', beam) over it;
- corpus BLEU with sacreBLEU's 13a tokenization (tools/bleu.py), cross-
  checked with NLTK's corpus_bleu on the same tokenized text;
- with --parity, the same weights decoded by PyTorch (tools/marian_torch.py,
  Hugging Face's generate() rules, same beam settings): how many outputs are
  identical;
- --factor sets transformer.max_length_factor (0: no runaway guard, as
  Hugging Face); --save writes the translations, --compare counts how many
  differ from a saved run.
"""
import argparse
import gzip
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bleu import corpus_bleu, tokenize_13a  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(os.path.dirname(ROOT), "shared", "data", "multi30k")
MODEL = "multi30k_de_en"


def read(split, lang):
    with gzip.open(os.path.join(DATA, "%s.%s.gz" % (split, lang)), "rt", encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def psql(sql):
    return subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"], input=sql,
                          capture_output=True, text=True, check=True).stdout


def sql_translate(split, beam, factor=None, model=MODEL, plain=False, settings=(), model_dir=None):
    load = ("SELECT import_model('%s') WHERE NOT EXISTS (SELECT FROM transformer_models WHERE name = '%s') \\g /dev/null"
            % (model, model) if model_dir is None else
            "SELECT drop_model('%s') \\g /dev/null\nSELECT import_model('%s', '%s') \\g /dev/null"
            % (model, model, model_dir.replace("'", "''")))
    out = psql(("SET transformer.max_length_factor = %s;" % factor if factor is not None else "") +
               "".join("SET %s = '%s';" % tuple(s.split("=", 1)) for s in settings) + """
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS transformer;
%(load)s
CREATE TEMP TABLE docs (n serial, body text);
\\copy docs(body) FROM PROGRAM 'zcat %(path)s' WITH (FORMAT csv, QUOTE E'\\x01', DELIMITER E'\\x02', NULL E'\\x03')
\\pset recordsep '\\x1e'
SELECT translate(body, '%(m)s', %(beam)d%(opts)s) FROM docs ORDER BY n;
""" % dict(m=model, load=load, path=os.path.join(DATA, split + ".de.gz"), beam=beam,
           opts=", keep => '{}', split => false" if plain else ""))
    return out.rstrip("\n").split("\x1e")


def torch_translate(lines, beam):
    import torch
    import marian_torch as mt
    torch.set_num_threads(1)
    t = mt.Translator(os.path.join(ROOT, "models", MODEL))
    return [t.translate(s, beam) for s in lines]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", default="test_2016_flickr")
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--parity", action="store_true", help="also decode with PyTorch and compare")
    ap.add_argument("--show", type=int, default=0, help="print the first N translations")
    ap.add_argument("--factor", help="transformer.max_length_factor for the run")
    ap.add_argument("--plain", action="store_true",
                    help="each line as one segment with no verbatim spans (keep => '{}', split => false): "
                         "the model's own decoding, as PyTorch's")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a setting for the session, e.g. transformer.compute_type=bf16 (repeatable)")
    ap.add_argument("--model-dir", help="import this model directory (as model 'evaluated') and score it "
                    "instead of the bundled model, e.g. tools/finetune_multi30k.py's output")
    ap.add_argument("--save", help="write the translations to this file")
    ap.add_argument("--compare", help="count the translations that differ from this file's")
    args = ap.parse_args()

    refs = read(args.split, "en")
    t0 = time.time()
    hyps = sql_translate(args.split, args.beam, args.factor, plain=args.plain, settings=args.set,
                         model="evaluated" if args.model_dir else MODEL, model_dir=args.model_dir)
    elapsed = time.time() - t0
    assert len(hyps) == len(refs), (len(hyps), len(refs))

    from nltk.translate.bleu_score import corpus_bleu as nltk_bleu
    ours = corpus_bleu(hyps, [refs])
    nltk = 100 * nltk_bleu([[tokenize_13a(r).split()] for r in refs], [tokenize_13a(h).split() for h in hyps])
    print("%s, beam %d%s, %d sentences through SQL in %.0f s: BLEU %.2f (13a; NLTK on the same tokens: %.2f)"
          % (args.split, args.beam, "".join(", " + s for s in args.set), len(hyps), elapsed, ours, nltk))
    if args.save:
        with open(args.save, "w", encoding="utf-8") as f:
            f.write("\n".join(hyps) + "\n")
    if args.compare:
        with open(args.compare, encoding="utf-8") as f:
            other = f.read().split("\n")[:-1]
        changed = sum(a != b for a, b in zip(hyps, other))
        print("  differ from %s: %d of %d" % (args.compare, changed, len(hyps)))
    for de, h, r in list(zip(read(args.split, "de"), hyps, refs))[:args.show]:
        print("  de: %s\n  ->  %s\n  en: %s" % (de, h, r))
    if args.parity:
        ref_out = torch_translate(read(args.split, "de"), args.beam)
        same = sum(a == b for a, b in zip(hyps, ref_out))
        print("  identical to PyTorch's decoding of the same weights: %d of %d (%.1f%%)"
              % (same, len(hyps), 100.0 * same / len(hyps)))
        for i, (a, b) in enumerate(zip(hyps, ref_out)):
            if a != b:
                print("  differs #%d:\n    sql:   %s\n    torch: %s" % (i + 1, a, b))


if __name__ == "__main__":
    main()

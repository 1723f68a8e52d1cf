#!/usr/bin/python3
"""Documents: translate() of 5-sentence paragraphs vs translate() of each
sentence, beam 4, one backend: the bundled model (German), or
transformer-base with OPUS-MT en-mg's configuration and random weights
(English; its outputs run to translate()'s runaway guard, 3 x the source).

The paragraphs are the first N x 5 test_2016_flickr sentences that end in
a full stop, five to a paragraph, joined by a space.  Both sides translate
the same sentences: translate(paragraph) splits each paragraph into its
sentences and decodes the five together (the batched decoder); the other
side runs SELECT translate(sentence) FROM each sentence.  Both are timed in
the server (the median of REPS runs of each query), alternating, in one
session.  Reported: the ratio per-sentence / per-paragraph of each round,
as median [min, max], and whether the outputs agree (the paragraph's
translation equals its sentences' translations joined by spaces).

Needs a running server (PGHOST etc.) with the extension installed.
Usage: bench/translate_documents.py [--model bundled|base] [-n PARAGRAPHS] [--rounds R] [--reps REPS]
"""
import argparse
import re

import benchlib as bl


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=40, help="paragraphs")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--model", default="bundled", choices=("bundled", "base"))
    args = ap.parse_args()

    lang, model = ("de", "multi30k_de_en") if args.model == "bundled" else ("en", "base_random")
    lines = [s for s in bl.sentences(lang, 1000) if re.search(r"[.!?]$", s)][: 5 * args.n]
    paras = [" ".join(lines[i: i + 5]) for i in range(0, len(lines), 5)]
    s = bl.Session()
    s.query("SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS transformer;")
    if args.model == "bundled":
        s.query("SELECT import_model('multi30k_de_en') WHERE NOT EXISTS "
                "(SELECT FROM transformer_models WHERE name = 'multi30k_de_en');")
    else:
        directory, _ = bl.make_base_model("F32")
        s.query("SELECT drop_model('base_random'); SELECT import_model('base_random', %s);" % bl.quote(directory))
    s.query("SET transformer.default_model = %s;" % bl.quote(model))
    s.query(bl.TIMER)
    s.query("CREATE TEMP TABLE paras (n int, body text); CREATE TEMP TABLE sents (n int, k int, body text);")
    for i, p in enumerate(paras):
        s.query("INSERT INTO paras VALUES (%d, %s);" % (i, bl.quote(p)))
        for k, l in enumerate(lines[5 * i: 5 * i + 5]):
            s.query("INSERT INTO sents VALUES (%d, %d, %s);" % (i, k, bl.quote(l)))
    s.query("SET transformer.max_length_factor = 3;")
    same = s.query("SELECT count(*) FROM paras p WHERE translate(p.body) = "
                   "(SELECT string_agg(translate(x.body), ' ' ORDER BY k) FROM sents x WHERE x.n = p.n);")
    ratios = []
    for r in range(args.rounds):
        t_doc = float(s.query("SELECT pg_temp.bench_median('SELECT count(translate(body)) FROM paras', %d);" % args.reps))
        t_sent = float(s.query("SELECT pg_temp.bench_median('SELECT count(translate(body)) FROM sents', %d);" % args.reps))
        ratios.append(t_sent / t_doc)
        print("round %d: paragraphs %.2f s, sentences %.2f s: %.2fx" % (r + 1, t_doc, t_sent, t_sent / t_doc), flush=True)
    s.close()
    med, lo, hi = bl.summary(ratios)
    print("%s: %d paragraphs of 5 sentences, beam 4: translate(paragraph) is %.2fx [%.2f, %.2f] as fast as "
          "translate() of each sentence; outputs agree on %s of %d paragraphs"
          % (model, len(paras), med, lo, hi, same, len(paras)))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Throughput over a table: SELECT translate(body) FROM docs, 1,000 rows.

docs holds the 1,000 German sentences of Multi30k test_2016_flickr; the
model is the bundled multi30k_de_en, beam 4 (its default).
1. SELECT translate(body) FROM docs serially (max_parallel_workers_per_gather
   = 0) and with 2 parallel workers (the table has parallel_workers = 2: it
   is too small in pages to get workers by size); the outputs must be
   identical.  Again with the table stored at fillfactor 10, which splits
   the work into smaller pieces.
2. The batch form, translate(text[]) over groups of 32 rows, vs PyTorch
   batched beam-4 decoding at batch 32 (bench/torch_decode.py: KV cache,
   inference_mode, one thread, finished sentences leave the batch): target
   tokens per second, the tokens counted from PyTorch's outputs (EOS
   included) for both, and the outputs compared.
Medians [min, max] of REPS runs.

Needs a running server (PGHOST etc.) with the extension installed.
Usage: bench/translate_throughput.py [REPS] [ROWS]
"""
import sys
import time

import benchlib as bl

bl.reexec_with_coretype()
import torch  # noqa: E402
import torch_decode as td  # noqa: E402

REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
ROWS = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
BATCH = 32
MODEL = "multi30k_de_en"


def sql_timed(setup, query, reps):
    """(times, last output rows) of a query run reps times in one session."""
    script = [setup, bl.TIMER.replace("pg_temp.bench_median", "pg_temp.unused"), "\\timing on"]
    for _ in range(reps):
        script.append(query)
    out = bl.psql("\n".join(script))
    times, rows, cur = [], [], []
    for line in out.split("\n"):
        if line.startswith("Time: "):
            times.append(float(line.split()[1]) / 1000)
            rows, cur = cur, []
        else:
            cur.append(line)
    return times, rows


def main():
    torch.set_num_threads(1)
    sents = bl.sentences("de", ROWS)
    bl.psql("SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS transformer;"
            "SELECT drop_model(%s); SELECT import_model(%s);"
            "DROP TABLE IF EXISTS docs; CREATE TABLE docs (id int PRIMARY KEY, body text);"
            "ALTER TABLE docs SET (parallel_workers = 2);" % (bl.quote(MODEL), bl.quote(MODEL)))
    bl.psql("INSERT INTO docs VALUES " + ",".join("(%d, %s)" % (i, bl.quote(s)) for i, s in enumerate(sents))
            + "; VACUUM ANALYZE docs;")
    warm = "SET transformer.default_model = %s; SELECT length(translate('a'));" % bl.quote(MODEL)
    query = "SELECT translate(body) FROM docs ORDER BY id;"
    serial_t, serial_out = sql_timed(warm + "SET max_parallel_workers_per_gather = 0;", query, REPS)
    plan = bl.psql("SET transformer.default_model = %s; SET max_parallel_workers_per_gather = 2;"
                   "EXPLAIN (COSTS OFF) %s" % (bl.quote(MODEL), query))
    par_t, par_out = sql_timed(warm + "SET max_parallel_workers_per_gather = 2;", query, REPS)
    assert "Workers Planned: 2" in plan, plan
    print("SELECT translate(body) FROM docs, %d rows, beam 4 (plan with workers:\n%s)" % (ROWS, plan))
    print("  serial      %.2f s [%.2f, %.2f]" % bl.summary(serial_t))
    print("  2 workers   %.2f s [%.2f, %.2f]" % bl.summary(par_t))
    print("  speed-up    %.2fx; identical outputs %d/%d"
          % (bl.summary(serial_t)[0] / bl.summary(par_t)[0],
             sum(a == b for a, b in zip(serial_out, par_out)), ROWS))

    # A parallel scan hands out whole pages: ~75 short rows, ~0.8 s of
    # translation each, so the last pages leave a core idle.  With smaller
    # pages of rows (fillfactor 10: ~8 rows a page) the work splits evenly.
    bl.psql("DROP TABLE IF EXISTS docs_ff; CREATE TABLE docs_ff (id int PRIMARY KEY, body text) "
            "WITH (fillfactor = 10, parallel_workers = 2); INSERT INTO docs_ff SELECT * FROM docs; "
            "VACUUM ANALYZE docs_ff;")
    query_ff = query.replace("FROM docs", "FROM docs_ff")
    par_ff_t, par_ff_out = sql_timed(warm + "SET max_parallel_workers_per_gather = 2;", query_ff, REPS)
    pages = bl.psql("SELECT relpages FROM pg_class WHERE relname IN ('docs', 'docs_ff') ORDER BY relname")
    print("  2 workers, table with fillfactor 10 (%s pages instead of %s): %.2f s [%.2f, %.2f], "
          "%.2fx serial; identical outputs %d/%d"
          % (pages.split()[1], pages.split()[0], *bl.summary(par_ff_t), bl.summary(serial_t)[0] / bl.summary(par_ff_t)[0],
             sum(a == b for a, b in zip(serial_out, par_ff_out)), ROWS))

    # the batch form, groups of 32 rows, vs PyTorch at batch 32
    batch_q = ("SELECT unnest(translate(array_agg(body ORDER BY id), %s, 4)) FROM docs "
               "GROUP BY id / %d ORDER BY id / %d;" % (bl.quote(MODEL), BATCH, BATCH))
    batch_t, batch_out = sql_timed(warm + "SET max_parallel_workers_per_gather = 0;", batch_q, REPS)

    tr = bl.mt.Translator(bl.BUNDLED)
    dec = td.IncrementalDecoder(tr.model)
    srcs = [tr.source_ids(s) for s in sents]
    torch_t = []
    for _ in range(REPS):
        t0 = time.perf_counter()
        ids = []
        for i in range(0, len(srcs), BATCH):
            ids += dec.beam(srcs[i: i + BATCH], 4)
        torch_t.append(time.perf_counter() - t0)
    tokens = sum(len(x) + 1 for x in ids)
    torch_out = [tr.tgt.decode_pieces([tr.inv[i] for i in x]) for x in ids]
    same = sum(a == b for a, b in zip(torch_out, batch_out))
    sql_tps = [tokens / t for t in batch_t]
    torch_tps = [tokens / t for t in torch_t]
    print("batch form translate(text[]) in groups of %d vs PyTorch batched beam 4 at batch %d"
          " (%d target tokens)" % (BATCH, BATCH, tokens))
    print("  PyTorch     %.0f tokens/s [%.0f, %.0f]" % bl.summary(torch_tps))
    print("  SQL         %.0f tokens/s [%.0f, %.0f]" % bl.summary(sql_tps))
    print("  ratio       %.2fx; identical outputs %d/%d"
          % (bl.summary(sql_tps)[0] / bl.summary(torch_tps)[0], same, ROWS))
    print("  (one-row form serially: %.0f tokens/s, %.2fx PyTorch batched)"
          % (tokens / bl.summary(serial_t)[0], tokens / bl.summary(serial_t)[0] / bl.summary(torch_tps)[0]))


if __name__ == "__main__":
    main()

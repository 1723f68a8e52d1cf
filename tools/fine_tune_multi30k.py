#!/usr/bin/python3
"""Fine-tune the bundled model on Multi30k with fine_tune() in SQL, and score it (issue 41).

  pg_virtualenv /usr/bin/python3 tools/fine_tune_multi30k.py [--epochs 5] [--rate 4.9e-4] [--average 3]

- puts Multi30k's 29,000 training pairs (../shared/data) in a table, in
  their file order;
- SELECT fine_tune('multi30k_de_en', NAME, 'SELECT de, en FROM multi30k_train
  ORDER BY n', ...): a background job of the server; every minute its step,
  the mean loss of its last 10 steps, tokens a second and the worker's peak
  memory (VmHWM) are printed;
- once it is done, the new model translates test_2016 and test_2017 through
  SQL translate() (beam 4, as tools/evaluate.py does: corpus BLEU, 13a),
  beside the bundled model.
"""
import argparse
import gzip
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bleu import corpus_bleu  # noqa: E402
import evaluate  # noqa: E402

DATA = evaluate.DATA


def psql(sql):
    return evaluate.psql(sql).strip()


def worker_hwm_kb(job):
    pid = psql("SELECT pid FROM pg_stat_activity WHERE application_name = 'transformer job %d worker 1'" % job)
    if not pid:
        return 0
    try:
        with open("/proc/%s/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", default="multi30k_de_en_ft")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--max-steps", type=int)
    ap.add_argument("--batch", type=int, default=160, help="pairs a step (about 3,000 target tokens)")
    ap.add_argument("--rate", type=float, default=4.9e-4)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--average", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pairs", type=int, help="only the first N pairs (a quick try)")
    args = ap.parse_args()

    psql("""
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS transformer;
SELECT import_model('multi30k_de_en') WHERE NOT EXISTS (SELECT FROM transformer_models WHERE name = 'multi30k_de_en');
DROP TABLE IF EXISTS multi30k_de, multi30k_en, multi30k_train;
CREATE TABLE multi30k_de (n serial PRIMARY KEY, de text);
CREATE TABLE multi30k_en (n serial PRIMARY KEY, en text);
\\copy multi30k_de(de) FROM PROGRAM 'zcat %(de)s' WITH (FORMAT csv, QUOTE E'\\x01', DELIMITER E'\\x02', NULL E'\\x03')
\\copy multi30k_en(en) FROM PROGRAM 'zcat %(en)s' WITH (FORMAT csv, QUOTE E'\\x01', DELIMITER E'\\x02', NULL E'\\x03')
CREATE TABLE multi30k_train AS SELECT n, de, en FROM multi30k_de JOIN multi30k_en USING (n) %(limit)s;
SELECT drop_model('%(name)s') WHERE EXISTS (SELECT FROM transformer_models WHERE name = '%(name)s');
""" % dict(de=os.path.join(DATA, "train.de.gz"), en=os.path.join(DATA, "train.en.gz"), name=args.name,
           limit="WHERE n <= %d" % args.pairs if args.pairs else ""))
    call = ("SELECT fine_tune('multi30k_de_en', '%s', 'SELECT de, en FROM multi30k_train ORDER BY n', epochs => %d, "
            "max_steps => %s, batch_size => %d, learning_rate => %g, warmup_steps => %d, average_last => %d, seed => %d)"
            % (args.name, args.epochs, args.max_steps or "NULL", args.batch, args.rate, args.warmup, args.average,
               args.seed))
    print(call, flush=True)
    job = int(psql(call))
    t0 = time.time()
    hwm = 0
    while True:
        state, step, total, loss, tps = psql(
            "SELECT state, coalesce(step, 0), steps_total, coalesce(round(loss::numeric, 4), 0), "
            "coalesce(tokens_per_second, 0) FROM transformer_jobs WHERE id = %d" % job).split("|")
        hwm = max(hwm, worker_hwm_kb(job))
        print("%5.1f min: %s, step %s of %s, loss %s (last 10 steps), %s tokens/s, worker peak %d MB"
              % ((time.time() - t0) / 60, state, step, total, loss, tps, hwm // 1024), flush=True)
        if state not in ("queued", "running"):
            break
        time.sleep(60)
    if state != "done":
        sys.exit(psql("SELECT last_error FROM transformer_jobs WHERE id = %d" % job))
    summary = psql("SELECT count(*), sum(tokens), round(sum(seconds)::numeric, 1), "
                   "round((sum(tokens) / sum(seconds))::numeric, 0), round(min(loss)::numeric, 4) "
                   "FROM transformer_job_steps WHERE job = %d" % job)
    print("job %d done in %.1f minutes: steps, tokens, seconds training, tokens/s, lowest loss: %s"
          % (job, (time.time() - t0) / 60, summary), flush=True)
    for split in ("test_2016_flickr", "test_2017_flickr"):
        refs = evaluate.read(split, "en")
        for model in ("multi30k_de_en", args.name):
            hyps = evaluate.sql_translate(split, 4, model=model)
            print("%s, %s, beam 4: BLEU %.2f" % (split, model, corpus_bleu(hyps, [refs])), flush=True)


if __name__ == "__main__":
    main()

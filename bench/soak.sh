#!/bin/bash
# Soak (issue 17): pgbench with 8 clients for SECONDS (default 300) on a mix
# of translate() (one row, the batch form, a document), attend() over a
# table, tokenize(), encoder_output(), and import_model()/drop_model() of a
# second model at the same time.  Reports transactions and errors per
# script (only the expected one: a translator finding the second model
# dropped, 42704, caught), each backend's own memory (anonymous, so not the
# shared weights files) every 10 s (it must stay flat), and that the postmaster never restarted.  Needs a server (PGHOST
# etc.); run as root or postgres to read the backends' memory.  Runs of 5
# minutes or more print the memory by minute (SOAK_MEMORY_OUT=file keeps
# every sample: time, pid, kB).
#   bench/soak.sh [SECONDS]        (make soak: 30 s, in make test)
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-300}
DB=transformer_soak
PGBENCH=$(command -v pgbench || echo /usr/lib/postgresql/15/bin/pgbench)
work=$(mktemp -d)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
dir=$PWD/test/fixtures/models/paper_relu
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$DB" "$@"; }

dropdb --if-exists "$DB"
createdb "$DB"
q <<SQL >/dev/null
SET client_min_messages = warning;
CREATE EXTENSION transformer;
SELECT import_model('multi30k_de_en');
SELECT import_model('second', '$dir');
CREATE TABLE kv AS SELECT i, ARRAY[sin(i), cos(i), sin(2 * i), cos(3 * i)]::real[] k,
  ARRAY[cos(5 * i), sin(7 * i)]::real[] v FROM generate_series(1, 20000) i;
CREATE FUNCTION try_second(t text) RETURNS text LANGUAGE plpgsql AS \$\$
BEGIN
  RETURN translate(t, 'second', 2);
EXCEPTION WHEN undefined_object THEN RETURN NULL;   -- dropped meanwhile: expected
END \$\$;
SQL
start=$(q -c "SELECT pg_postmaster_start_time()")

cat > "$work/one.sql" <<'SQL'
SELECT translate('Ein Mann fährt Fahrrad auf der Straße.', 'multi30k_de_en');
SQL
cat > "$work/batch.sql" <<'SQL'
SELECT translate(ARRAY['Zwei Hunde spielen im Schnee.', 'Eine Frau liest ein Buch.', NULL, 'Kinder spielen am Strand.'], 'multi30k_de_en', 2);
SQL
cat > "$work/document.sql" <<'SQL'
SELECT translate('Ein Mann fährt Fahrrad. Zwei Hunde spielen im Schnee. Eine Frau liest ein Buch im Park.', 'multi30k_de_en');
SQL
cat > "$work/attend.sql" <<'SQL'
SELECT attend('{1,0.5,-1,0.25}'::real[], k, v) FROM kv;
SQL
cat > "$work/tokenize.sql" <<'SQL'
SELECT tokenize('Eine Gruppe von Menschen steht vor einem Gebäude.', 'multi30k_de_en/source');
SQL
cat > "$work/encode.sql" <<'SQL'
SELECT cardinality(encoder_output('Ein Hund rennt durch das Gras.', 'multi30k_de_en'));
SQL
cat > "$work/second.sql" <<'SQL'
SELECT try_second('SELECT attention FROM memory');
SQL
cat > "$work/churn.sql" <<SQL
\set r random(1, 2)
SELECT CASE WHEN :r = 1 THEN import_model('second', '$dir')::text ELSE drop_model('second')::text END;
SQL

# memory of each client backend every 10 s (3 s in short runs)
interval=$(( SECS >= 120 ? 10 : 3 ))
(
	while true; do
		sleep "$interval"
		psql -X -q -A -t -d "$DB" -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench'" 2>/dev/null |
		while read -r pid; do
			# anonymous memory: the backend's own (mapped shared files and shared buffers excluded)
			[ -r "/proc/$pid/smaps_rollup" ] && echo "$(date +%s) $pid $(awk '/^Pss_Anon:/ {print $2}' "/proc/$pid/smaps_rollup")"
		done
	done
) > "$work/memory" 2>/dev/null &
sampler=$!

"$PGBENCH" -n -c 8 -j 2 -T "$SECS" -d "$DB" -r --failures-detailed \
	-f "$work/one.sql@4" -f "$work/batch.sql@2" -f "$work/document.sql@2" -f "$work/attend.sql@2" \
	-f "$work/tokenize.sql@4" -f "$work/encode.sql@2" -f "$work/second.sql@2" -f "$work/churn.sql@1" \
	> "$work/pgbench.out" 2>&1 || { kill "$sampler"; cat "$work/pgbench.out" >&2; exit 1; }
kill "$sampler" 2>/dev/null || true

grep -E "^(number of transactions actually processed|number of failed transactions|latency average|tps)" "$work/pgbench.out"
grep -E "^SQL script [0-9]+:|^ - [0-9]+ transactions" "$work/pgbench.out" | paste - - | sed 's/ - / /' | awk '{print "  " $0}'
failed=$(awk '/^number of failed transactions/ {print $5}' "$work/pgbench.out")
# memory: each backend's anonymous memory over its samples, the growth from its second sample to its last
awk '{n[$2]++; if (n[$2] == 2) first[$2] = $3; last[$2] = $3; max[$2] = ($3 > max[$2] ? $3 : max[$2])}
     END {for (p in n) if (n[p] >= 3) { d = last[p] - first[p]; if (d > worst) worst = d; cnt++; sum += last[p] }
          printf "memory: %d backends sampled every %d s; their own (anonymous) memory at the end %.1f MB on average; the largest growth from the second sample to the last %.1f MB\n", cnt, iv, (cnt ? sum / cnt / 1024 : 0), worst / 1024 }' iv="$interval" "$work/memory"
# the series, a line per minute (long runs): is the memory bounded, not just slow to grow?
if [ "$SECS" -ge 300 ]; then
	echo "memory by minute (MB of anonymous memory per backend: mean, largest):"
	awk 'NR == 1 {t0 = $1} {m = int(($1 - t0) / 60); s[m] += $3; c[m]++; if ($3 > mx[m]) mx[m] = $3; if (m > last) last = m}
	     END {for (i = 0; i <= last; i++) if (c[i]) printf "  minute %2d: %6.1f %6.1f\n", i + 1, s[i] / c[i] / 1024, mx[i] / 1024}' "$work/memory"
	[ -n "${SOAK_MEMORY_OUT:-}" ] && cp "$work/memory" "$SOAK_MEMORY_OUT"
fi
now=$(q -c "SELECT pg_postmaster_start_time()")
if [ "$now" != "$start" ]; then
	echo "soak: the postmaster restarted ($start -> $now)" >&2
	exit 1
fi
echo "soak: the postmaster never restarted; failed transactions: $failed"
[ "$failed" = 0 ] || exit 1
dropdb "$DB"

#!/bin/bash
# Killed backends (issue 17): kill -9 a backend in the middle of
# import_model() and in the middle of writing a shared weights file; after
# the server's crash recovery no partial model is visible, no damaged or
# half-written file is trusted, and everything translates.
#   test/crash/run.sh    (make crash; needs a server (PGHOST etc.) and the right to kill its backends: root or postgres)
set -euo pipefail
cd "$(dirname "$0")/../.."
DB=transformer_crash
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$DB" "$@"; }
wait_ready() {
	for _ in $(seq 1 100); do
		if psql -X -q -A -t -d postgres -c "SELECT 1" >/dev/null 2>&1; then return 0; fi
		sleep 0.2
	done
	echo "crash: the server did not come back" >&2
	exit 1
}
# run SQL in the background, return its backend's pid once it is running
start_bg() {
	local tag=$1 sql=$2
	psql -X -q -A -t -d "$DB" -c "SET application_name = '$tag'; $sql" >/dev/null 2>&1 &
	for _ in $(seq 1 100); do
		pid=$(psql -X -q -A -t -d "$DB" -c "SELECT pid FROM pg_stat_activity WHERE application_name = '$tag' AND state = 'active'")
		[ -n "$pid" ] && { echo "$pid"; return 0; }
		sleep 0.05
	done
	echo "crash: $tag did not start" >&2
	exit 1
}

dropdb --if-exists "$DB"
createdb "$DB"
q -c "SET client_min_messages = warning; CREATE EXTENSION transformer; SELECT import_model('multi30k_de_en');" >/dev/null
want=$(q -c "SELECT translate('Zwei Hunde spielen im Schnee.', 'multi30k_de_en')")
dir=$PWD/test/fixtures/models/paper_relu
want_m=$(q -c "SELECT import_model('m', '$dir'); SELECT translate('SELECT attention FROM memory', 'm', 3)" | tail -1)
q -c "SELECT drop_model('m')" >/dev/null

# 1. kill -9 in the middle of import_model(): each tensor row waits a little (a test trigger)
q -c "CREATE FUNCTION slow_row() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN PERFORM pg_sleep(0.05); RETURN NEW; END \$\$;
      CREATE TRIGGER slow BEFORE INSERT ON transformer_tensors FOR EACH ROW EXECUTE FUNCTION slow_row();"
pid=$(start_bg importer "SELECT import_model('m', '$dir')")
sleep 0.5
rows=$(q -c "SELECT count(*) FROM pg_locks WHERE pid = $pid")
kill -9 "$pid"
wait || true
wait_ready
q -c "DROP TRIGGER slow ON transformer_tensors; DROP FUNCTION slow_row();"
left=$(q -c "SELECT (SELECT count(*) FROM transformer_models WHERE name = 'm') + (SELECT count(*) FROM transformer_tensors WHERE model = 'm') + (SELECT count(*) FROM transformer_tokenizers WHERE name LIKE 'm/%')")
if [ "$left" != 0 ]; then
	echo "crash: after kill -9 during import_model, $left rows of the model are visible" >&2
	exit 1
fi
got=$(q -c "SELECT translate('Zwei Hunde spielen im Schnee.', 'multi30k_de_en')")
got_m=$(q -c "SELECT import_model('m', '$dir'); SELECT translate('SELECT attention FROM memory', 'm', 3)" | tail -1)
if [ "$got" != "$want" ] || [ "$got_m" != "$want_m" ]; then
	echo "crash: after recovery: \"$got\", \"$got_m\"" >&2
	exit 1
fi
echo "crash: kill -9 in the middle of import_model() (it held $rows locks): no row of the model visible after recovery; it imports and translates again"

# 2. kill -9 while the shared weights file is being written: whatever the kill
#    left (a temporary file of a dead backend, nothing, or the whole file) is
#    never trusted unchecked, and everything translates
cache=$(q -c "LOAD 'transformer'; SELECT current_setting('data_directory') || '/' || current_setting('transformer.weight_cache_dir')")
for delay in 0.02 0.05 0.08 0.12; do
	q -c "SELECT import_model('multi30k_de_en')" >/dev/null      # removes its files
	pid=$(start_bg writer "SELECT pg_sleep(0.3); SELECT translate('Zwei Hunde spielen im Schnee.', 'multi30k_de_en')")
	sleep 0.3
	sleep "$delay"
	kill -9 "$pid" 2>/dev/null || true
	wait || true
	wait_ready
	got=$(q -c "SELECT translate('Zwei Hunde spielen im Schnee.', 'multi30k_de_en')")
	if [ "$got" != "$want" ]; then
		echo "crash: kill after ${delay}s of loading: translated \"$got\"" >&2
		exit 1
	fi
done
# and the states a crash can leave, staged: a dead backend's temporary file, and a
# final file cut short (as after a power loss before the data reached the disk)
q -c "SELECT import_model('multi30k_de_en')" >/dev/null
q -c "SELECT translate('Zwei Hunde spielen im Schnee.', 'multi30k_de_en')" >/dev/null
file=$(q -c "SELECT file FROM transformer_weight_files() WHERE kind = 'weights' AND name = 'multi30k_de_en' AND state = 'current'")
head -c 100000 "$cache/$file" > "$cache/tmp.999999.0"
truncate -s 200000 "$cache/$file"
got=$(q -c "SELECT translate('Zwei Hunde spielen im Schnee.', 'multi30k_de_en')")
size=$(stat -c %s "$cache/$file")
if [ "$got" != "$want" ] || [ "$size" -le 200000 ] || [ -e "$cache/tmp.999999.0" ]; then
	echo "crash: staged damage: \"$got\", file of $size bytes, dead writer's file $(ls "$cache" | grep -c '^tmp\.999999')" >&2
	exit 1
fi
echo "crash: kill -9 while writing the shared file (4 timings), a dead writer's temporary file and a file cut short: never trusted; rebuilt ($size bytes), swept, and everything translates"
dropdb "$DB"
test/crash/xid_reuse.sh

#!/bin/bash
# A crash must never make translate() silently use another version's shared
# files (issue 23, item 1).  A transaction imports weights A as model "m" and
# translates with them (in 0.3.0 that built the shared file), then its
# backend is killed with kill -9: the server restarts, and the WAL tail of
# that transaction, never written, is gone, so its xid and its rows' ctids
# are handed out again.  Then different weights B are written as "m" and
# committed, and translate() must equal translate() with shared_weights off.
# The rows are written by plain INSERTs, as a restore or a user's own
# loader does (import_model() also removes the name's files, which would
# hide the bug), in the same order both times, so the ctids repeat too.
# Cycles repeat until the xid and the ctids really repeated three times
# (asserted at least once), at most $1 cycles.  Each restart also checks
# that the first use removes every file built before it.
#   test/crash/xid_reuse.sh [max cycles]   (part of make crash; root or postgres)
set -euo pipefail
cd "$(dirname "$0")/../.."
DB=transformer_xid_reuse
MAX=${1:-20}
work=$(mktemp -d)
chmod 755 "$work"
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$DB" "$@"; }
wait_ready() {
	for _ in $(seq 1 150); do
		if psql -X -q -A -t -d postgres -c "SELECT 1" >/dev/null 2>&1; then return 0; fi
		sleep 0.2
	done
	echo "xid reuse: the server did not come back" >&2
	exit 1
}
cleanup() {
	psql -X -q -d postgres -c "ALTER SYSTEM RESET wal_writer_delay" -c "SELECT pg_reload_conf()" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

# weights B: A's with every fp16 sign flipped (same names, shapes and sizes,
# so the same ctids); the tokenizers are A's
a=$PWD/test/fixtures/models/paper_relu
b=$work/paper_relu_negated
cp -r "$a" "$b"
tools/flip_fp16_signs.py "$b/model.safetensors"
chmod -R o+rX "$work"

# the walwriter would write the doomed transaction's WAL out within 200 ms; at
# 10 s it rarely does before the kill, and then the xid is really lost
psql -X -q -d postgres -c "ALTER SYSTEM SET wal_writer_delay = '10s'" -c "SELECT pg_reload_conf()" >/dev/null
dropdb --if-exists "$DB"
createdb "$DB"
q -c "SET client_min_messages = warning; CREATE EXTENSION transformer;" >/dev/null
src="SELECT attention FROM memory"
# model $2 as a copy of model $1's rows, by plain INSERTs
copy_as() {
	cat <<EOF
INSERT INTO transformer_models (name, config, config_json, vocab_json, safetensors_header, source_tokenizer, target_tokenizer)
  SELECT '${2:-m}', config, config_json, vocab_json, safetensors_header, source_tokenizer, target_tokenizer FROM transformer_models WHERE name = '$1';
INSERT INTO transformer_tensors (model, name, shape, dtype, data_offset, data)
  SELECT '${2:-m}', name, shape, dtype, data_offset, data FROM transformer_tensors WHERE model = '$1' ORDER BY name;
EOF
}
# Room for m inside the tables' pages, before b's rows: then neither
# insert extends a table (an extension outlives the crash and moves the
# next insert's ctids), and both fill the same free space the same way.
q -c "SELECT import_model('a', '$a')" >/dev/null
q -c "$(copy_as a room)" >/dev/null
q -c "SELECT import_model('b', '$b')" >/dev/null
q -c "SELECT drop_model('room')" >/dev/null
rows_sql="SELECT md5(string_agg(ctid::text, ' ' ORDER BY name)) FROM (SELECT name, ctid FROM transformer_tensors WHERE model = 'm' UNION ALL SELECT '', ctid FROM transformer_models WHERE name = 'm') r"

repeats=0
cycles=0
while [ "$cycles" -lt "$MAX" ]; do
	cycles=$((cycles + 1))
	q -c "SELECT translate('$src', 'a', 3)" >/dev/null
	q -c "SET client_min_messages = warning; SELECT drop_model('m')" -c "VACUUM transformer_models, transformer_tensors" -c "CHECKPOINT" >/dev/null
	# the doomed transaction: A's rows as m, translate, report, and wait to be killed
	out=$work/doomed.$cycles
	psql -X -q -A -t -d "$DB" > "$out" 2>&1 <<EOF &
SET application_name = 'doomed';
BEGIN;
$(copy_as a)
SELECT 'xid', txid_current();
SELECT 'rows', ($rows_sql);
SELECT 'translation', translate('$src', 'm', 3);
SELECT 'published', count(*) FROM transformer_weight_files() WHERE name LIKE 'm%' AND state = 'current';
SELECT pg_sleep(600);
EOF
	for _ in $(seq 1 300); do
		grep -q '^published' "$out" && break
		sleep 0.05
	done
	if ! grep -q '^published' "$out"; then
		echo "xid reuse: the doomed transaction did not get to translate:" >&2
		cat "$out" >&2
		exit 1
	fi
	pid=$(q -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'doomed'")
	kill -9 "$pid"
	wait || true
	wait_ready
	# the first use after the restart removes every file of the cluster:
	# model a's file, built before the crash, is gone once b is used
	before=$(q -c "SELECT count(*) FROM transformer_weight_files() WHERE kind = 'weights' AND name = 'a'")
	q -c "SELECT translate('$src', 'b', 3)" >/dev/null
	after=$(q -c "SELECT count(*) FROM transformer_weight_files() WHERE kind = 'weights' AND name = 'a'")
	if [ "$before" != 1 ] || [ "$after" != 0 ]; then
		echo "xid reuse: model a's file before the crash's first use: $before, after: $after (want 1, then 0)" >&2
		exit 1
	fi
	lost_xid=$(sed -n 's/^xid|//p' "$out")
	published=$(sed -n 's/^published|//p' "$out")
	if [ "$published" != 0 ]; then
		echo "xid reuse: $published shared files were published from rows not yet committed" >&2
		exit 1
	fi

	# weights B under the same name, committed
	new_xid=$(q -c "BEGIN; $(copy_as b) SELECT txid_current(); COMMIT;" | tail -1)
	lost_rows=$(sed -n 's/^rows|//p' "$out")
	new_rows=$(q -c "$rows_sql")
	got=$(q -c "SELECT translate('$src', 'm', 3)")
	again=$(q -c "SELECT translate('$src', 'm', 3)")       # from the shared file this time
	want=$(q -c "SET transformer.shared_weights = off; SELECT translate('$src', 'm', 3)")
	current=$(q -c "SELECT count(*) FROM transformer_weight_files() WHERE kind = 'weights' AND name = 'm' AND state = 'current'")
	if [ "$got" != "$want" ] || [ "$again" != "$want" ]; then
		echo "xid reuse: cycle $cycles (xid $lost_xid, then $new_xid): translated \"$got\" then \"$again\", with shared_weights off \"$want\"" >&2
		exit 1
	fi
	if [ "$current" != 1 ]; then
		echo "xid reuse: cycle $cycles: $current current shared files of m, not 1" >&2
		exit 1
	fi
	if [ "$lost_xid" = "$new_xid" ] && [ "$lost_rows" = "$new_rows" ]; then
		repeats=$((repeats + 1))
		echo "xid reuse: cycle $cycles: xid $lost_xid and every ctid of the lost rows were handed out again; the translation is the committed weights' (\"$got\")"
		if [ "$repeats" -ge 3 ]; then break; fi
		continue
	fi
	if [ "$lost_xid" = "$new_xid" ]; then
		echo "xid reuse: cycle $cycles: xid $lost_xid was handed out again, but not all the ctids; again"
	else
		echo "xid reuse: cycle $cycles: xid $lost_xid reached the disk before the kill (the new rows got $new_xid); again"
	fi
done
if [ "$repeats" = 0 ]; then
	echo "xid reuse: in $cycles crash cycles the xid and the ctids never repeated together: the test proved nothing" >&2
	exit 1
fi
echo "xid reuse: $cycles crash cycles, xid and ctids repeated in $repeats; never a file from rows not committed, always the committed weights"
dropdb "$DB"

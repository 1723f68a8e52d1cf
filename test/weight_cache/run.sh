#!/bin/bash
# Shared weights files, the cases SQL alone cannot stage (make weight-cache;
# needs a server: PGHOST etc.):
#  - several backends loading a model at once, each building the file: one
#    file results, and every backend translates correctly;
#  - a full disk (a 1 MB tmpfs, when run as root): a WARNING, and the right
#    translation from the backend's own copy;
#  - pg_basebackup leaves the files out, and a hot standby made from it
#    builds its own and translates as the primary does (as root).
set -euo pipefail
cd "$(dirname "$0")/../.."
DB=transformer_weight_cache
work=$(mktemp -d)
standby_pid=""
cleanup() {
	if [ -n "$standby_pid" ]; then
		runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$work/standby" -m immediate stop >/dev/null 2>&1 || true
	fi
	if mountpoint -q "$work/full" 2>/dev/null; then umount "$work/full"; fi
	rm -rf "$work"
}
trap cleanup EXIT
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$DB" "$@"; }

dropdb --if-exists "$DB"
createdb "$DB"
q -c "SET client_min_messages = warning; CREATE EXTENSION transformer; SELECT import_model('multi30k_de_en');" >/dev/null
want=$(q -c "SET transformer.shared_weights = off; SELECT translate('Zwei Hunde spielen im Schnee.', 'multi30k_de_en', 4)")

# 1. builders at once
for round in 1 2 3 4 5; do
	q -c "SELECT import_model('multi30k_de_en')" >/dev/null     # removes the file
	for i in 1 2 3 4; do
		q -c "SELECT translate('Zwei Hunde spielen im Schnee.', 'multi30k_de_en', 4)" > "$work/out.$i" &
	done
	wait
	for i in 1 2 3 4; do
		if [ "$(cat "$work/out.$i")" != "$want" ]; then
			echo "weight cache: round $round, backend $i translated \"$(cat "$work/out.$i")\", not \"$want\"" >&2
			exit 1
		fi
	done
	files=$(q -c "SELECT string_agg(state, ',') FROM transformer_weight_files() WHERE kind = 'weights' AND name = 'multi30k_de_en' AND state <> 'other database'")
	if [ "$files" != "current" ]; then
		echo "weight cache: round $round left files: $files" >&2
		exit 1
	fi
done
echo "weight cache: 5 rounds of 4 backends building at once: one file each time, every translation right"

# 2. a damaged tokenizer file: the next backend sees it, removes it, and one after rebuilds it
tok=$(q -c "SELECT current_setting('data_directory') || '/' || current_setting('transformer.weight_cache_dir') || '/' || file FROM transformer_weight_files() WHERE kind = 'tokenizer' AND name = 'multi30k_de_en/source' AND state = 'current'")
tokens=$(q -c "SELECT tokenize('Zwei Hunde spielen im Schnee.', 'multi30k_de_en/source')")
sum=$(md5sum < "$tok")
printf '\x55' | dd of="$tok" bs=1 seek=$(( $(stat -c %s "$tok") - 3000 )) conv=notrunc 2>/dev/null
got=$(q -c "SELECT tokenize('Zwei Hunde spielen im Schnee.', 'multi30k_de_en/source')")
got2=$(q -c "SELECT tokenize('Zwei Hunde spielen im Schnee.', 'multi30k_de_en/source')")
if [ "$got" != "$tokens" ] || [ "$got2" != "$tokens" ] || [ ! -f "$tok" ] || [ "$(md5sum < "$tok")" != "$sum" ]; then
	echo "weight cache: a damaged tokenizer file: \"$got\", \"$got2\", rebuilt: $(md5sum < "$tok" 2>&1)" >&2
	exit 1
fi
echo "weight cache: a damaged tokenizer file: refused, removed, rebuilt byte for byte by the next backend"

if [ "$(id -u)" != 0 ]; then
	echo "weight cache: not root, so no full-disk and standby cases"
	exit 0
fi

# 3. a full disk
mkdir -p "$work/full"
chmod 755 "$work"
if mount -t tmpfs -o size=1m tmpfs "$work/full" 2>/dev/null; then
	chown postgres "$work/full"
	out=$(q -c "SET transformer.weight_cache_dir = '$work/full'; SELECT translate('Zwei Hunde spielen im Schnee.', 'multi30k_de_en', 4)" 2>"$work/err")
	if [ "$out" != "$want" ] || ! grep -q "could not allocate shared weights file" "$work/err"; then
		echo "weight cache: full disk: \"$out\"; $(cat "$work/err")" >&2
		exit 1
	fi
	echo "weight cache: a full disk: WARNING ($(grep -o 'could not allocate[^:]*: [^"]*$' "$work/err" | head -1)), the right translation"
	umount "$work/full"
else
	echo "weight cache: cannot mount a tmpfs here; no full-disk case"
fi

# 4. pg_basebackup and a hot standby
pg_basebackup -D "$work/standby" -R -X stream -c fast
if [ -n "$(find "$work/standby" -name '*.tfw' -o -name 'pgsql_tmp_transformer' | head -1)" ]; then
	echo "weight cache: pg_basebackup copied shared weights files" >&2
	exit 1
fi
# Debian keeps a cluster's configuration outside its data directory: a minimal one
printf "hot_standby = on\nlisten_addresses = ''\n" > "$work/standby/postgresql.conf"
echo "local all all trust" > "$work/standby/pg_hba.conf"
: > "$work/standby/pg_ident.conf"
chown -R postgres "$work/standby"
chmod 700 "$work/standby"
mkdir "$work/sock"
chown postgres "$work/sock"
port=$((${PGPORT:-5432} + 17))
runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$work/standby" -l "$work/standby/standby.log" -w \
	-o "-p $port -k $work/sock -c hot_standby=on" start >/dev/null || { cat "$work/standby/standby.log" >&2; exit 1; }
standby_pid=started
got=$(psql -X -q -A -t -h "$work/sock" -p "$port" -d "$DB" -c "SELECT pg_is_in_recovery(), translate('Zwei Hunde spielen im Schnee.', 'multi30k_de_en', 4)")
states=$(psql -X -q -A -t -h "$work/sock" -p "$port" -d "$DB" -c "SELECT string_agg(state, ',') FROM transformer_weight_files() WHERE kind = 'weights' AND name = 'multi30k_de_en' AND state <> 'other database'")
if [ "$got" != "t|$want" ] || [ "$states" != "current" ]; then
	echo "weight cache: standby: \"$got\", files \"$states\"" >&2
	exit 1
fi
echo "weight cache: pg_basebackup left the files out; the hot standby built its own and translates as the primary"

# 5. two clusters sharing one weight_cache_dir (issue 23): fresh clusters
#    given the same commands hand out the same database OID, xids and
#    ctids, so only the cluster's system identifier tells their files apart.
#    Different weights under the same name: each translates with its own.
runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$work/standby" -m fast stop >/dev/null
standby_pid=""
shared_dir=$work/shared_cache
mkdir -p "$shared_dir" "$work/two"
chown postgres "$shared_dir" "$work/two"
cp -r test/fixtures/models/paper_relu "$work/two/a"
cp -r test/fixtures/models/paper_relu "$work/two/b"
tools/flip_fp16_signs.py "$work/two/b/model.safetensors"
chmod -R o+rX "$work/two"
two_pids=()
for c in a b; do
	runuser -u postgres -- /usr/lib/postgresql/15/bin/initdb -D "$work/two/pg_$c" -A trust >/dev/null
	port=$((${PGPORT:-5432} + 20 + $(printf '%d' "'$c") - 96))
	runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$work/two/pg_$c" -l "$work/two/pg_$c.log" -w \
		-o "-p $port -k $work/sock -c listen_addresses='' -c transformer.weight_cache_dir=$shared_dir" start >/dev/null
done
stop_two() {
	for c in a b; do
		runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$work/two/pg_$c" -m immediate stop >/dev/null 2>&1 || true
	done
}
trap 'stop_two; cleanup' EXIT
qc() { local c=$1; shift; psql -X -q -A -t -v ON_ERROR_STOP=1 -h "$work/sock" -p $((${PGPORT:-5432} + 20 + $(printf '%d' "'$c") - 96)) -U postgres "$@"; }
src="SELECT attention FROM memory"
for c in a b; do
	qc "$c" -d postgres -c "CREATE DATABASE two" >/dev/null
	qc "$c" -d two -c "SET client_min_messages = warning; CREATE EXTENSION transformer; SELECT import_model('m', '$work/two/$c')" >/dev/null
done
oids=$(qc a -d two -c "SELECT oid FROM pg_database WHERE datname = 'two'")/$(qc b -d two -c "SELECT oid FROM pg_database WHERE datname = 'two'")
rows=$(qc a -d two -c "SELECT xmin || ctid::text FROM transformer_models")/$(qc b -d two -c "SELECT xmin || ctid::text FROM transformer_models")
for round in 1 2; do
	for c in a b; do
		got=$(qc "$c" -d two -c "SELECT translate('$src', 'm', 3)")
		want=$(qc "$c" -d two -c "SET transformer.shared_weights = off; SELECT translate('$src', 'm', 3)")
		if [ "$got" != "$want" ]; then
			echo "weight cache: two clusters sharing a directory: cluster $c, round $round translated \"$got\", its own weights \"$want\"" >&2
			exit 1
		fi
	done
done
want_a=$(qc a -d two -c "SET transformer.shared_weights = off; SELECT translate('$src', 'm', 3)")
want_b=$(qc b -d two -c "SET transformer.shared_weights = off; SELECT translate('$src', 'm', 3)")
if [ "$want_a" = "$want_b" ]; then
	echo "weight cache: two clusters: both weights translate alike; the case proves nothing" >&2
	exit 1
fi
files=$(ls "$shared_dir" | grep -c '\.tfw$')
other=$(qc a -d two -c "SELECT count(*) FROM transformer_weight_files() WHERE state = 'other cluster'")
if [ "$other" = 0 ]; then
	echo "weight cache: two clusters: cluster a sees none of b's files as another cluster's" >&2
	exit 1
fi
echo "weight cache: two clusters sharing one directory (database OIDs $oids, model rows $rows): $files files, each cluster translates with its own weights, the other's files listed as 'other cluster'"

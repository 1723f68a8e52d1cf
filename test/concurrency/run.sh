#!/bin/sh
# Importers, replacers, droppers and translators of the same models at once
# (pgbench, 6 clients): one lock order for import, replace and drop, so no
# deadlock and no foreign-key error.  Translators may find a model gone
# (42704), which they catch; any other error aborts a client and fails.
#   test/concurrency/run.sh [seconds]     (make concurrency; needs a server: PGHOST etc.)
set -eu
cd "$(dirname "$0")/../.."
SECONDS_TO_RUN=${1:-20}
DB=transformer_concurrency
PGBENCH=$(command -v pgbench || echo /usr/lib/postgresql/15/bin/pgbench)
dir=$PWD/test/fixtures/models/paper_relu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

dropdb --if-exists "$DB"
createdb "$DB"
psql -X -q -v ON_ERROR_STOP=1 -d "$DB" <<SQL
SET client_min_messages = warning;
CREATE EXTENSION transformer;
CREATE TABLE files AS SELECT
  pg_read_binary_file('$dir/config.json') AS config, pg_read_binary_file('$dir/model.safetensors') AS st,
  pg_read_binary_file('$dir/source.spm') AS spm, pg_read_binary_file('$dir/vocab.json') AS vocab;
CREATE FUNCTION try_translate(m text) RETURNS text LANGUAGE plpgsql AS \$\$
BEGIN
  RETURN translate('SELECT attention FROM memory', m, 2);
EXCEPTION WHEN undefined_object THEN RETURN NULL;   -- dropped meanwhile
END \$\$;
SQL
cat > "$work/import.sql" <<'SQL'
\set m random(1, 2)
SELECT load_model('cc' || :m, config, st, spm, spm, vocab) FROM files;
SQL
cat > "$work/import_dir.sql" <<SQL
\set m random(1, 2)
SELECT import_model('cc' || :m, '$dir');
SQL
cat > "$work/drop.sql" <<'SQL'
\set m random(1, 2)
SELECT drop_model('cc' || :m);
SQL
cat > "$work/translate.sql" <<'SQL'
\set m random(1, 2)
SELECT try_translate('cc' || :m);
SQL

status=0
"$PGBENCH" -n -c 6 -j 2 -T "$SECONDS_TO_RUN" -d "$DB" \
  -f "$work/import.sql@2" -f "$work/import_dir.sql@1" -f "$work/drop.sql@2" -f "$work/translate.sql@4" \
  > "$work/out" 2>&1 || status=$?
grep -E "^(transaction type|number of (transactions|failed)|latency average|tps)|SQL script|aborted|ERROR|deadlock|foreign key" "$work/out" | head -40
if [ "$status" -ne 0 ] || grep -qiE "aborted|deadlock|foreign key|ERROR" "$work/out"; then
  echo "concurrency: FAILED (pgbench exit status $status)"
  exit 1
fi
echo "concurrency: ok, no deadlock and no foreign-key error"
dropdb "$DB"

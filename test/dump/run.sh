#!/bin/bash
# Dump and restore (issue 17): a database with models (the bundled fp16 one
# and its int8 copy), their tokenizers, a tokenizer of its own and a docs
# table, dumped with pg_dump in the custom and the plain formats and
# restored into new databases: the same rows, identical translations, and
# the shared weights files built afresh for the new database.
#   test/dump/run.sh    (make dump; needs a server: PGHOST etc.)
set -euo pipefail
cd "$(dirname "$0")/../.."
DB=transformer_dump
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }

for d in "$DB" "${DB}_custom" "${DB}_plain"; do dropdb --force --if-exists "$d"; done
createdb "$DB"
q -d "$DB" <<SQL >/dev/null
SET client_min_messages = warning;
CREATE EXTENSION transformer;
SELECT import_model('multi30k_de_en');
SELECT quantize_model('multi30k_de_en', 'de_en_int8');
SELECT import_tokenizer('tiny', '$PWD/test/fixtures/spm/tiny_unigram_identity.model');
CREATE TABLE docs (id int PRIMARY KEY, de text, en text);
INSERT INTO docs (id, de) VALUES (1, 'Ein Mann fährt Fahrrad.'), (2, 'Zwei Hunde spielen im Schnee.'),
  (3, 'Eine Frau liest ein Buch im Park.'), (4, 'Kinder spielen am Strand.');
UPDATE docs SET en = translate(de, 'multi30k_de_en');
-- background jobs (issue 37): one syncing, one paused with rows queued, one running its backlog at dump time
CREATE TABLE jsync (id int PRIMARY KEY, de text, en text);
CREATE TABLE jpaused (id int PRIMARY KEY, de text, en text);
CREATE TABLE jbusy (id int PRIMARY KEY, de text, en text);
INSERT INTO jsync VALUES (1, 'Ein Hund.', NULL);
INSERT INTO jbusy SELECT i, 'Ein Mann Nummer ' || i || ' fährt mit dem Fahrrad durch die Stadt.', NULL FROM generate_series(1, 600) i;
SQL
q -d "$DB" -c "SELECT translate_column('jsync', 'de', 'en', 'multi30k_de_en')" >/dev/null
q -d "$DB" -c "SELECT wait_for_job(1)" >/dev/null
q -d "$DB" -c "SELECT translate_column('jpaused', 'de', 'en', 'multi30k_de_en')" >/dev/null
q -d "$DB" -c "SELECT pause_job(2)" >/dev/null
q -d "$DB" -c "INSERT INTO jpaused VALUES (1, 'Eine Katze.', NULL), (2, 'Ein Vogel.', NULL)" >/dev/null
q -d "$DB" -c "SELECT translate_column('jbusy', 'de', 'en', 'multi30k_de_en', keep_in_sync => false)" >/dev/null
sleep 2
busy_at_dump=$(q -d "$DB" -c "SELECT state || ' with ' || rows_pending || ' rows pending' FROM transformer_jobs WHERE id = 3")
fingerprint="SELECT md5(string_agg(name || dtype || md5(data), ',' ORDER BY model, name)) FROM transformer_tensors"
check="SELECT string_agg(id || ':' || translate(de, 'multi30k_de_en') || '|' || translate(de, 'de_en_int8') || '|' || en, ';' ORDER BY id) FROM docs"
tokens="SELECT tokenize('SELECT attention FROM memory', 'tiny')::text"
want_rows=$(q -d "$DB" -c "$fingerprint")
want=$(q -d "$DB" -c "$check")
want_tokens=$(q -d "$DB" -c "$tokens")

pg_dump -Fc -d "$DB" -f "$work/dump.custom"
pg_dump -Fp -d "$DB" -f "$work/dump.sql"
createdb "${DB}_custom"
pg_restore -d "${DB}_custom" --exit-on-error "$work/dump.custom"
createdb "${DB}_plain"
q -d "${DB}_plain" -f "$work/dump.sql" >/dev/null

for d in "${DB}_custom" "${DB}_plain"; do
	rows=$(q -d "$d" -c "$fingerprint")
	got=$(q -d "$d" -c "$check")
	got_tokens=$(q -d "$d" -c "$tokens")
	files=$(q -d "$d" -c "SELECT string_agg(kind || ' ' || name || ' ' || state, ', ' ORDER BY kind, name) FROM transformer_weight_files() WHERE database = (SELECT oid FROM pg_database WHERE datname = current_database())")
	if [ "$rows" != "$want_rows" ] || [ "$got" != "$want" ] || [ "$got_tokens" != "$want_tokens" ]; then
		echo "dump: restored $d differs: rows $rows vs $want_rows; \"$got\" vs \"$want\"; $got_tokens vs $want_tokens" >&2
		exit 1
	fi
	case "$files" in
		*"weights de_en_int8 current"*"weights multi30k_de_en current"*) ;;
		*) echo "dump: $d has the shared files \"$files\"" >&2; exit 1 ;;
	esac
	echo "dump: ${d#${DB}_} format: every tensor byte for byte, translations (fp16, int8) and tokens identical; shared files built for the new database ($files)"
	# the jobs: the running one goes on by itself after the first use (the checks above), the
	# syncing one translates a new row, the paused one keeps its queue until resumed
	q -d "$d" -c "INSERT INTO jsync VALUES (2, 'Zwei Hunde spielen.', NULL)" >/dev/null
	paused=$(q -d "$d" -c "SELECT state || ' ' || rows_pending FROM transformer_jobs WHERE id = 2")
	q -d "$d" -c "SELECT resume_job(2)" >/dev/null
	for j in 1 2 3; do q -d "$d" -c "SELECT wait_for_job($j, '3 min')" >/dev/null; done
	jobs=$(q -d "$d" -c "SELECT string_agg(id || ' ' || state || ' ' || rows_pending, ', ' ORDER BY id) FROM transformer_jobs")
	bad=$(q -d "$d" -c "SELECT (SELECT count(*) FROM jsync WHERE en IS DISTINCT FROM translate(de, 'multi30k_de_en'))
	                          + (SELECT count(*) FROM jpaused WHERE en IS DISTINCT FROM translate(de, 'multi30k_de_en'))
	                          + (SELECT count(*) FROM jbusy WHERE en IS DISTINCT FROM translate(de, 'multi30k_de_en'))")
	if [ "$paused" != "paused 2" ] || [ "$jobs" != "1 syncing 0, 2 syncing 0, 3 done 0" ] || [ "$bad" != 0 ]; then
		echo "dump: restored $d: jobs \"$jobs\" (the paused one was \"$paused\"), $bad rows not translated" >&2
		exit 1
	fi
	echo "dump: ${d#${DB}_} format: 3 jobs restored (at dump time the busy one was $busy_at_dump): it finished after the first use, the syncing one translated a new row, the paused one kept its 2 rows until resumed"
done
for d in "$DB" "${DB}_custom" "${DB}_plain"; do dropdb --force "$d"; done

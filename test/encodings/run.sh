#!/bin/bash
# The extension in LATIN1 and SQL_ASCII databases (issue 23): import,
# translate (text and HTML), tokenize, align and the pictures give the UTF8 database's
# answers (test/encodings/encodings.sql).  Needs a server (PGHOST etc.) and pgTAP.
#   test/encodings/run.sh    (make encodings)
set -euo pipefail
cd "$(dirname "$0")/../.."
export PGCLIENTENCODING=UTF8
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$@"; }
src='Ein kleines Mädchen isst ein Eis.'
src2='Zwei Hunde spielen im Schnee.'

# the answers of a UTF8 database
dropdb --if-exists transformer_enc_utf8
createdb -E UTF8 -T template0 --locale=C transformer_enc_utf8
q transformer_enc_utf8 -c "SET client_min_messages = warning; CREATE EXTENSION transformer; SELECT import_model('multi30k_de_en')" >/dev/null
ans() { q transformer_enc_utf8 -c "$1"; }
want_translation=$(ans "SELECT translate('$src', 'multi30k_de_en')")
want_translation2=$(ans "SELECT translate('$src2', 'multi30k_de_en')")
want_ids=$(ans "SELECT tokenize('$src', 'multi30k_de_en/source')")
want_tokens=$(ans "SELECT tokens('$src', 'multi30k_de_en/source')")
want_align=$(ans "SELECT string_agg(source_word || '>' || target_word, ' ' ORDER BY target_pos) FROM align('$src', 'multi30k_de_en')")
want_katze=$(ans "SELECT translate('Katzeä', 'multi30k_de_en')")
want_html=$(ans "SELECT translate('<p title=\"Ein Mädchen\">$src <b>Zwei</b> Hunde, 3 Bälle.</p>', 'multi30k_de_en', format => 'html')")
# (as hex: U+FFFD is kept verbatim, and a LATIN1 server could not read it in the test's text)
want_katze_replaced=$(ans "SELECT encode(convert_to(translate(U&'Katze\FFFD', 'multi30k_de_en'), 'UTF8'), 'hex')")
dropdb transformer_enc_utf8

for enc in LATIN1 SQL_ASCII; do
	db=transformer_enc_$(echo "$enc" | tr 'A-Z' 'a-z')
	dropdb --if-exists "$db"
	createdb -E "$enc" -T template0 --locale=C "$db"
	q "$db" -c "CREATE EXTENSION pgtap" >/dev/null
	# LATIN1 lacks SentencePiece's space marker U+2581: pieces show it as a space
	tokens=$want_tokens
	[ "$enc" = LATIN1 ] && tokens=$(echo "$want_tokens" | sed 's/▁\([^,}]*\)/" \1"/g')
	pg_prove -d "$db" --set "src=$src" --set "src2=$src2" --set "want_translation=$want_translation" \
		--set "want_translation2=$want_translation2" --set "want_ids=$want_ids" --set "want_tokens=$tokens" \
		--set "want_align=$want_align" --set "want_katze=$want_katze" --set "want_katze_replaced=$want_katze_replaced" \
		--set "want_html=$want_html" \
		test/encodings/encodings.sql
	dropdb "$db"
done

#!/bin/sh
# Pictures seen in a real browser (Debian's chromium, headless): the SVGs of
# attention_svg() and heatmap_svg() are drawn onto a canvas; in each row the
# darkest cell must be where the largest weight is, and labels with <, &
# and right-to-left text must come out as given.  No chromium is a failure.
#   test/browser/run.sh          (make browser; needs a server: PGHOST etc.)
set -eu
cd "$(dirname "$0")/../.."
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ]; then
	echo "browser: FAILED, chromium is not installed (tools/install-deps.sh installs it)"
	exit 1
fi
DB=transformer_browser
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dropdb --if-exists "$DB" >/dev/null 2>&1
createdb "$DB"

# each case: the SVG, the column of each row's largest weight (0-based), labels to find
psql -X -q -At -v ON_ERROR_STOP=1 -d "$DB" > "$work/cases.tsv" <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION transformer;
SELECT import_model('multi30k_de_en') \g /dev/null
SET transformer.max_length_factor = 0;
CREATE TEMP TABLE w AS
SELECT query_pos, key_pos, avg(weight) AS w FROM attention_map('Ein kleines Mädchen isst ein Eis.', 'multi30k_de_en')
WHERE stack = 'cross' AND layer = 3 GROUP BY 1, 2;
SELECT 'cross', to_json(attention_svg('Ein kleines Mädchen isst ein Eis.', 'multi30k_de_en')),
       (SELECT json_agg(k ORDER BY query_pos) FROM (SELECT DISTINCT ON (query_pos) query_pos, key_pos - 1 AS k FROM w ORDER BY query_pos, w DESC) x),
       '["▁Ein", "▁Mädchen"]';
SELECT 'tricky', to_json(heatmap_svg('{{0.1,0.7,0.2},{0.5,0.3,0.2},{0.05,0.05,0.9}}', ARRAY['<b>', 'a & b', 'שלום'], ARRAY['مرحبا', '"q"', '&amp;'], 'Labels <that> & "must" escape')),
       '[1, 0, 2]', '["<b>", "a & b", "שלום", "مرحبا", "\"q\"", "&amp;"]';
SQL
status=0
while IFS='|' read -r name svg expect labels; do
	page="$work/$name.html"
	SVG="$svg" EXPECT="$expect" LABELS="$labels" perl -pe 's/\@SVG\@/$ENV{SVG}/g; s/\@EXPECT\@/$ENV{EXPECT}/g; s/\@LABELS\@/$ENV{LABELS}/g' \
		test/browser/check.html.in > "$page"
	result=$("$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
		--disable-component-update --disable-sync --user-data-dir="$work/profile" --virtual-time-budget=5000 \
		--dump-dom "file://$page" 2>/dev/null | sed -n 's:.*<pre id="out">\(.*\)</pre>.*:\1:p')
	echo "browser $name: ${result:-FAIL: no result}"
	case "$result" in PASS*) ;; *) status=1 ;; esac
	if [ "$name" = cross ] && [ -n "${TRANSFORMER_PICTURE:-}" ]; then
		printf '%s' "$svg" | perl -MJSON::PP -0777 -ne 'print JSON::PP->new->allow_nonref->decode($_)' > "$work/cross.svg"
		"$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
			--disable-component-update --disable-sync --user-data-dir="$work/profile" --hide-scrollbars \
			--window-size=440,360 --screenshot="$TRANSFORMER_PICTURE" "file://$work/cross.svg" >/dev/null 2>&1
	fi
done < "$work/cases.tsv"
dropdb "$DB"
exit $status

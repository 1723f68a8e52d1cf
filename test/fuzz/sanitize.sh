#!/bin/bash
# Every fuzzer over its seeds, then SECONDS more of each (libFuzzer, ASan,
# UBSan), four and then six at a time (two rounds): executions and crashes per fuzzer; exits non-zero
# on any crash.
#   test/fuzz/sanitize.sh [SECONDS]     (make sanitize)
set -uo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH=${1:-60}
# two at a time (one per core); each writes its verdict to a file
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() {
	local name=$1 maxlen=$2 corpus=$3; shift 3
	mkdir -p "$corpus"
	"test/fuzz/$name" -max_total_time="$SECONDS_EACH" -max_len="$maxlen" -rss_limit_mb=4096 -timeout=10 \
		-print_final_stats=1 -artifact_prefix="test/fuzz/crash-$name-" "$corpus" "$@" > "test/fuzz/$name.log" 2>&1
	local rc=$?
	local runs
	runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "test/fuzz/$name.log" | awk '{print $2}')
	if [ $rc -ne 0 ]; then
		{ echo "FAIL $name: exit $rc after ${runs:-?} executions"
		  grep -E 'ERROR|runtime error|SUMMARY' "test/fuzz/$name.log" | head -5; } > "$out/$name.fail"
	else
		echo "ok   $name: ${runs} executions in ${SECONDS_EACH} s, 0 crashes" > "$out/$name.ok"
	fi
}
# two rounds of SECONDS each, however many fuzzers: the second shares the cores four ways
run fuzz_spm_model 1048576 test/fuzz/corpus-run test/fuzz/seeds &
run fuzz_safetensors_header 65536 test/fuzz/corpus-safetensors test/fuzz/seeds_safetensors &
run fuzz_torch_zip 65536 test/fuzz/corpus-torch-zip test/fuzz/seeds_torch_zip &
run fuzz_markup 4096 test/fuzz/corpus-markup test/fuzz/seeds_markup &
wait
run fuzz_text 4096 test/fuzz/corpus-text &
run fuzz_weight_file 65536 test/fuzz/corpus-weight-file test/fuzz/seeds_weight_file &
run fuzz_svg_label 4096 test/fuzz/corpus-svg-label &		# the cheapest
run fuzz_torch_pickle 65536 test/fuzz/corpus-torch-pickle test/fuzz/seeds_torch_pickle &
run fuzz_spans 4096 test/fuzz/corpus-spans &
run fuzz_rich_text 4096 test/fuzz/corpus-rich-text test/fuzz/seeds_rich_text test/fuzz/seeds_markup &
run fuzz_wordpiece 4096 test/fuzz/corpus-wordpiece test/fuzz/seeds_wordpiece &
wait
for name in fuzz_spm_model fuzz_safetensors_header fuzz_text fuzz_weight_file fuzz_svg_label fuzz_torch_zip fuzz_torch_pickle \
	fuzz_markup fuzz_spans fuzz_rich_text fuzz_wordpiece; do
	[ -f "$out/$name.ok" ] && cat "$out/$name.ok"
	[ -f "$out/$name.fail" ] && cat "$out/$name.fail" >&2
done
! ls "$out"/*.fail >/dev/null 2>&1

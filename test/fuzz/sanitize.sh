#!/bin/bash
# Every fuzzer over its seeds, then SECONDS more of each (libFuzzer, ASan,
# UBSan): executions and crashes per fuzzer; exits non-zero on any crash.
#   test/fuzz/sanitize.sh [SECONDS]     (make sanitize)
set -uo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH=${1:-60}
fail=0
run() {
	local name=$1 maxlen=$2 corpus=$3; shift 3
	mkdir -p "$corpus"
	"test/fuzz/$name" -max_total_time="$SECONDS_EACH" -max_len="$maxlen" -rss_limit_mb=4096 -timeout=10 \
		-print_final_stats=1 -artifact_prefix="test/fuzz/crash-$name-" "$corpus" "$@" > "test/fuzz/$name.log" 2>&1
	local rc=$?
	local runs
	runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "test/fuzz/$name.log" | awk '{print $2}')
	if [ $rc -ne 0 ]; then
		echo "FAIL $name: exit $rc after ${runs:-?} executions" >&2
		grep -E 'ERROR|runtime error|SUMMARY' "test/fuzz/$name.log" | head -5 >&2
		fail=1
	else
		echo "ok   $name: ${runs} executions in ${SECONDS_EACH} s, 0 crashes"
	fi
}
run fuzz_spm_model 1048576 test/fuzz/corpus-run test/fuzz/seeds
run fuzz_safetensors_header 65536 test/fuzz/corpus-safetensors test/fuzz/seeds_safetensors
run fuzz_text 4096 test/fuzz/corpus-text
run fuzz_weight_file 65536 test/fuzz/corpus-weight-file test/fuzz/seeds_weight_file
exit $fail

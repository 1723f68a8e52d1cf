#!/bin/bash
# The extension's pg_regress suite and pgTAP suite, once, against a private
# PostgreSQL 15 server that loads an AddressSanitizer + UndefinedBehavior-
# Sanitizer build of the extension (clang 14); then a summary: regression
# files and pgTAP tests passed/failed, and the sanitizers' reports,
# deduplicated, with their first lines.  Not part of CI; about 10-20 minutes.
#
#   test/sanitize_server/run.sh            (as root; from anywhere)
#
# Environment: SAN_WORK (default /var/tmp/transformer_sanitize, wiped and
# rebuilt), SAN_PORT (55432), SAN_KEEP=1 leaves the server running at the end.
# Exit status: 0 when every test passed (timing-only failures allowed) and
# the sanitizers reported nothing; 1 otherwise; 2 when the setup failed.
#
# How (everything stays under SAN_WORK; the system install, /work/main's
# build and any other server are not touched):
#  - a private copy of /usr/lib/postgresql/15 and /usr/share/postgresql/15
#    (relocatable: its pg_config and postgres use the copy's share and lib);
#  - the repository's files (git ls-files -co --exclude-standard) copied to
#    SAN_WORK/tree, with SAN_WORK/shared -> the repository's ../shared, built
#    with clang -O1 -g -fsanitize=address,undefined -fsanitize-recover=address
#    -shared-libasan -fno-wrapv (one runtime for both, so one log per
#    process), and installed into the copy; its stale LLVM bitcode is
#    removed, jit = off;
#  - postgres runs as the postgres user with LD_PRELOAD of clang's ASan
#    runtime and asan_early.so (see asan_early.c: without it the server hangs
#    at start), ASAN_OPTIONS with log_path (reports go to SAN_WORK/san/asan.PID;
#    a backend's stderr is only the server log), detect_leaks=0 (a forking
#    server with its own memory contexts), halt_on_error=0;
#  - the server and the tests run in a private mount namespace whose /tmp is
#    SAN_WORK/tmp, so the tests' fixed /tmp paths meet no other run's;
#  - a canary library (san_canary.c) with one heap overflow and one
#    undefined shift checks that both sanitizers report from a backend;
#  - pg_regress (make installcheck: the Makefile's REGRESS) in one go, then
#    pg_prove on each test/pgtap/*.sql in turn (PGAPPNAME names the file, so
#    a report is traced to the test that made it).
set -uo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$REPO/test/sanitize_server
WORK=${SAN_WORK:-/var/tmp/transformer_sanitize}
PORT=${SAN_PORT:-55432}
PGVER=15
SYS_LIB=/usr/lib/postgresql/$PGVER
SYS_SHARE=/usr/share/postgresql/$PGVER
ROOT=$WORK/root
BIN=$ROOT$SYS_LIB/bin
TREE=$WORK/tree
SOCK=$WORK/sock
DATA=$WORK/data
SAN=$WORK/san
RES=$WORK/results
LOG=$WORK/server.log
DB_TAP=transformer_tap

die() { echo "sanitize_server: $*" >&2; exit 2; }
say() { echo "== $(date +%H:%M:%S) $*"; }

# ------------------------------------------------------------------ inner part
# (in the private mount namespace: the server, the canary and the tests)
if [ "${SAN_INNER:-}" = 1 ]; then
	CLANG_ASAN=$(clang -print-file-name=libclang_rt.asan-x86_64.so)
	export PGHOST=$SOCK PGPORT=$PORT PGUSER=postgres
	unset PGDATABASE PGSERVICE PGOPTIONS PGPASSWORD

	server_pid() { head -1 "$DATA/postmaster.pid" 2>/dev/null; }
	stop_server() {
		local pid
		pid=$(server_pid)
		[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
		kill -INT "$pid"
		for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
		kill -QUIT "$pid" 2>/dev/null
	}
	[ "${SAN_KEEP:-}" = 1 ] || trap stop_server EXIT

	say "initdb"
	mkdir -p "$DATA" && chown postgres "$DATA" && chmod 700 "$DATA"
	runuser -u postgres -- "$BIN/initdb" -D "$DATA" -E UTF8 --locale=C.UTF-8 -A trust -U postgres \
		> "$WORK/initdb.log" 2>&1 || { tail -20 "$WORK/initdb.log"; die "initdb failed"; }
	cat >> "$DATA/postgresql.conf" <<-EOF
		# test/sanitize_server/run.sh
		listen_addresses = ''
		port = $PORT
		unix_socket_directories = '$SOCK'
		fsync = off
		synchronous_commit = off
		full_page_writes = off
		jit = off
		log_connections = on
		log_line_prefix = '%m [%p] %a: '
		log_min_messages = warning
	EOF

	say "starting postgres (ASan runtime $CLANG_ASAN preloaded)"
	ASAN_OPTS="log_path=$SAN/asan:detect_leaks=0:halt_on_error=0:abort_on_error=0:detect_stack_use_after_return=1"
	ASAN_OPTS+=":external_symbolizer_path=$(command -v llvm-symbolizer)"
	ASAN_OPTS+=":allocator_may_return_null=1:detect_odr_violation=0"
	# the server's own stderr (server log); reports go to $SAN/asan.PID
	runuser -u postgres -- env \
		LD_PRELOAD="$CLANG_ASAN $WORK/asan_early.so" \
		ASAN_OPTIONS="$ASAN_OPTS" \
		UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=0:report_error_type=1" \
		"$BIN/postgres" -D "$DATA" >> "$LOG" 2>&1 < /dev/null &
	ok=
	for _ in $(seq 1 300); do
		if "$BIN/pg_isready" -q -h "$SOCK" -p "$PORT"; then ok=1; break; fi
		kill -0 $! 2>/dev/null || break
		sleep 0.2
	done
	[ -n "$ok" ] || { tail -30 "$LOG"; die "the server did not start (see $LOG)"; }

	# the canary: both sanitizers must report from a backend
	say "canary"
	q() { "$BIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }
	q -d postgres -c "CREATE DATABASE san_canary" || die "createdb san_canary"
	PGAPPNAME=canary q -d san_canary \
		-c "CREATE FUNCTION canary_heap(int) RETURNS int AS 'san_canary', 'san_canary_heap' LANGUAGE C STRICT" \
		-c "CREATE FUNCTION canary_ub(int) RETURNS int AS 'san_canary', 'san_canary_ub' LANGUAGE C STRICT" \
		-c "SELECT canary_heap(5)" -c "SELECT canary_ub(40)" > "$RES/canary.out" 2>&1 ||
		{ cat "$RES/canary.out"; die "the canary functions failed"; }
	mkdir -p "$SAN/canary"
	canary_files=$(grep -l 'san_canary' "$SAN"/asan.* 2>/dev/null)
	[ -n "$canary_files" ] && mv $canary_files "$SAN/canary/"
	grep -qs 'AddressSanitizer: heap-buffer-overflow' "$SAN"/canary/* ||
		die "the canary's heap overflow was not reported: ASan is not working (see $LOG)"
	grep -qs 'san_canary.c:[0-9]*:[0-9]*: runtime error: shift exponent 40' "$SAN"/canary/* ||
		die "the canary's shift was not reported: UBSan is not working (see $LOG)"
	q -d postgres -c "DROP DATABASE san_canary"
	echo "canary: ASan and UBSan both report from a backend ($SAN/canary)"

	# pg_regress: the Makefile's REGRESS, in one go
	say "pg_regress"
	date +%s.%N > "$RES/regress.start"
	(cd "$TREE" && timeout 1800 make -s installcheck with_llvm=no) > "$RES/regress.out" 2>&1
	echo $? > "$RES/regress.rc"
	date +%s.%N > "$RES/regress.end"
	grep -E '^(test |     )?[a-z_0-9]+ +\.\.\. |tests? (passed|failed)|^ok |^not ok ' "$RES/regress.out" || tail -5 "$RES/regress.out"

	# pgTAP: each file by itself, named in PGAPPNAME
	say "pgTAP"
	q -d postgres -c "CREATE DATABASE $DB_TAP ENCODING 'UTF8' TEMPLATE template0" &&
		q -d "$DB_TAP" -c "CREATE EXTENSION pgtap" || die "could not make the pgTAP database"
	mkdir -p "$RES/pgtap"
	: > "$RES/pgtap/timeline.tsv"
	for f in "$TREE"/test/pgtap/*.sql; do
		name=$(basename "$f")
		t0=$(date +%s.%N)
		(cd "$TREE" && PGAPPNAME="pgtap/$name" timeout 1200 pg_prove -v -d "$DB_TAP" "test/pgtap/$name") \
			> "$RES/pgtap/$name.out" 2>&1
		rc=$?
		t1=$(date +%s.%N)
		printf '%s\t%s\t%s\t%s\n' "$name" "$t0" "$t1" "$rc" >> "$RES/pgtap/timeline.tsv"
		printf '%-28s %-13s %5s s\n' "$name" "$(grep -E '^Result:' "$RES/pgtap/$name.out" || echo "exit $rc")" \
			"$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", b - a }')"
	done

	say "stopping the server"
	if [ "${SAN_KEEP:-}" = 1 ]; then
		echo "server left running: PGHOST=$SOCK PGPORT=$PORT PGUSER=postgres (stop: kill -INT $(server_pid))"
	else
		stop_server
	fi
	exit 0
fi

# ------------------------------------------------------------------ outer part
[ "$(id -u)" = 0 ] || die "run as root (the server runs as the postgres user)"
for tool in clang llvm-symbolizer pg_prove git make awk unshare runuser /usr/bin/python3; do
	command -v "$tool" > /dev/null || die "$tool not found"
done
[ -x "$SYS_LIB/bin/postgres" ] || die "PostgreSQL $PGVER is not installed in $SYS_LIB"
[ -f "$SYS_SHARE/extension/pgtap.control" ] || die "pgTAP is not installed (postgresql-$PGVER-pgtap)"
CLANG_ASAN=$(clang -print-file-name=libclang_rt.asan-x86_64.so)
[ -f "$CLANG_ASAN" ] || die "clang's shared ASan runtime not found"
id postgres > /dev/null 2>&1 || die "no postgres user"
case "$WORK" in /tmp|/tmp/*) die "SAN_WORK must not be under /tmp (the tests get a private /tmp)";; esac

START=$(date +%s)

# a server left running by an earlier run (SAN_KEEP=1): ours only, by its pid
if [ -f "$WORK/data/postmaster.pid" ]; then
	old=$(head -1 "$WORK/data/postmaster.pid")
	if [ -n "$old" ] && grep -qs "$WORK/data" "/proc/$old/cmdline" 2>/dev/null; then
		say "stopping the server of an earlier run (pid $old)"
		kill -INT "$old"
		for _ in $(seq 1 300); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
	fi
fi
rm -rf "$WORK"
mkdir -p "$WORK" "$WORK/tmp" "$SOCK" "$SAN" "$RES" || die "cannot make $WORK"
chmod 755 "$WORK"
chmod 1777 "$WORK/tmp"
chown postgres "$SOCK" "$SAN"
d=$WORK
while [ "$d" != / ]; do d=$(dirname "$d"); [ -x "$d" ] || die "$d is not searchable by postgres"; done

say "private copy of the server in $ROOT"
mkdir -p "$ROOT/usr/lib/postgresql" "$ROOT/usr/share/postgresql"
cp -a "$SYS_LIB" "$ROOT/usr/lib/postgresql/" && cp -a "$SYS_SHARE" "$ROOT/usr/share/postgresql/" || die "copy failed"
# an installed transformer's files in the copy are replaced below; its bitcode goes
rm -rf "$ROOT$SYS_LIB/lib/bitcode/transformer" "$ROOT$SYS_LIB/lib/bitcode/transformer.index.bc"

say "copy of the source tree in $TREE"
mkdir -p "$TREE"
(cd "$REPO" && git ls-files -co --exclude-standard -z | xargs -0 cp -a --parents -t "$TREE") || die "copy of the tree failed"
if [ -d "$REPO/../shared" ]; then
	ln -s "$(cd "$REPO/../shared" && pwd)" "$WORK/shared"
else
	echo "note: $REPO/../shared not found: the tests that need ../shared/data skip"
fi

say "building with clang, ASan and UBSan"
# -fno-wrapv after PostgreSQL's -fwrapv: signed overflow is checked (with
# -fwrapv neither compiler emits the check); a report there is defined
# behaviour in the real build, but an overflowing size or index all the same
SAN_CFLAGS="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fsanitize-recover=address -shared-libasan -fno-wrapv"
SAN_CFLAGS+=" -Wno-unknown-warning-option -Wno-ignored-attributes -Wno-ignored-optimization-argument"
SAN_LINK="-fsanitize=address,undefined -shared-libasan"
# PGXS with the system's pg_config (headers in /usr/include), installed into the copy;
# CPPFLAGS without -D_FORTIFY_SOURCE (its __memcpy_chk & co. are not checked by ASan);
# with_llvm=no: no bitcode (jit is off anyway)
MAKEVARS=(CC=clang with_llvm=no "CPPFLAGS=-D_GNU_SOURCE -U_FORTIFY_SOURCE" "PG_CFLAGS=$SAN_CFLAGS")
(cd "$TREE" && make -j"$(nproc)" "${MAKEVARS[@]}" "SHLIB_LINK=-lopenblas -licuuc -lm $SAN_LINK" &&
	make "${MAKEVARS[@]}" install DESTDIR="$ROOT") > "$WORK/build.log" 2>&1 ||
	{ tail -30 "$WORK/build.log"; die "build failed (see $WORK/build.log)"; }
grep -E '^src/.*(warning|error)' "$WORK/build.log" | sort -u | head -20
mkdir -p "$WORK/canary"
cp "$HERE/san_canary.c" "$WORK/canary/"
printf 'MODULES = san_canary\nPGXS := $(shell pg_config --pgxs)\ninclude $(PGXS)\n' > "$WORK/canary/Makefile"
(cd "$WORK/canary" && make "${MAKEVARS[@]}" "PG_LDFLAGS=$SAN_LINK" && make "${MAKEVARS[@]}" install DESTDIR="$ROOT") \
	>> "$WORK/build.log" 2>&1 || die "canary build failed (see $WORK/build.log)"
clang -shared -fPIC -O1 -o "$WORK/asan_early.so" "$HERE/asan_early.c" -ldl >> "$WORK/build.log" 2>&1 ||
	die "asan_early.so build failed"
cmp -s "$TREE/transformer.so" "$ROOT$SYS_LIB/lib/transformer.so" || die "transformer.so was not installed into the copy"
nm -D "$ROOT$SYS_LIB/lib/transformer.so" | grep -c '__asan_report\|__ubsan_handle' > /dev/null ||
	die "transformer.so is not instrumented"
chmod -R a+rX "$WORK"

# the server and the tests, with a private /tmp
say "server and tests (private mount namespace, /tmp = $WORK/tmp)"
SAN_INNER=1 unshare --mount --propagation private -- bash -c \
	'mount --bind "$1" /tmp && exec "$2"' inner "$WORK/tmp" "$HERE/$(basename "$0")" 2>&1 | tee "$WORK/run.log"
inner=${PIPESTATUS[0]}
[ "$inner" = 0 ] || die "the run stopped early (exit $inner; see $WORK/run.log)"

END=$(date +%s)
/usr/bin/python3 "$HERE/summarize.py" "$WORK" "$((END - START))"

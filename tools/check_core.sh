#!/bin/sh
# The core (src/core) is pure C: it is built, unit-tested, fuzzed and
# benchmarked without a server.  Fail when a file there
#   - includes a PostgreSQL header (postgres.h, fmgr.h, utils/..., anything
#     found under PostgreSQL's include directories),
#   - includes a quoted header that is not in src/core (a header of the glue),
#   - or uses palloc, pfree, repalloc, ereport, elog or CHECK_FOR_INTERRUPTS.
# Comments are ignored (the core's comments may name the server's functions).
#
#   tools/check_core.sh [DIR]      (make check-core; DIR defaults to src/core)
CORE=${1:-src/core}
CC=${CC_CHECK:-gcc}
PG_CONFIG=${PG_CONFIG:-pg_config}

[ -d "$CORE" ] || { echo "check-core: no directory $CORE" >&2; exit 2; }

# PostgreSQL's include directories, where installed
PG_DIRS="/usr/include/postgresql /usr/include/postgresql/internal"
for opt in --includedir --includedir-server --pkgincludedir; do
	d=$("$PG_CONFIG" $opt 2>/dev/null) && PG_DIRS="$PG_DIRS $d"
done

# headers that are PostgreSQL's by name, installed or not
PG_NAMES='^(postgres|postgres_fe|postgres_ext|c|fmgr|funcapi|miscadmin|pgstat|pg_config[a-z_]*|libpq-fe|executor/.*|utils/.*|catalog/.*|access/.*|storage/.*|nodes/.*|commands/.*|common/.*|port/.*|mb/.*|lib/.*|libpq/.*|tcop/.*|parser/.*|optimizer/.*|postmaster/.*|replication/.*|jit/.*|foreign/.*|datatype/.*)(\.h)?$'
PG_CALLS='\b(palloc|palloc0|palloc_extended|pfree|repalloc|repalloc_huge|MemoryContextAlloc[A-Za-z]*|ereport|elog|CHECK_FOR_INTERRUPTS)\b'

fail=0
files=$(find "$CORE" -type f \( -name '*.c' -o -name '*.h' \) | sort)
[ -n "$files" ] || { echo "check-core: no source in $CORE" >&2; exit 2; }
for f in $files; do
	# the file without its comments, directives kept, nothing expanded
	code=$("$CC" -fpreprocessed -dD -E -P -x c "$f" 2>/dev/null) ||
		{ echo "$f: cannot be read by $CC -fpreprocessed" >&2; fail=1; continue; }
	includes=$(printf '%s\n' "$code" | sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*\([<"][^>"]*[>"]\).*/\1/p')
	for inc in $includes; do
		name=$(printf '%s' "$inc" | sed 's/^[<"]//; s/[>"]$//')
		if printf '%s\n' "$name" | grep -Eq "$PG_NAMES"; then
			echo "$f: includes $inc, a PostgreSQL header"
			fail=1
			continue
		fi
		for d in $PG_DIRS; do
			if [ -f "$d/$name" ]; then
				echo "$f: includes $inc, a PostgreSQL header ($d/$name)"
				fail=1
				break
			fi
		done
		case "$inc" in
		\"*) [ -f "$(dirname "$f")/$name" ] || [ -f "$CORE/$name" ] || {
				echo "$f: includes $inc, not a header of $CORE"
				fail=1
			} ;;
		esac
	done
	printf '%s\n' "$code" | grep -nE "$PG_CALLS" | while IFS= read -r line; do
		echo "$f: uses the server's API (comments stripped; line numbers approximate): $line"
	done
	if printf '%s\n' "$code" | grep -qE "$PG_CALLS"; then
		fail=1
	fi
done

if [ $fail -ne 0 ]; then
	echo "check-core: FAILED: src/core must stay free of PostgreSQL (see docs/development.md)" >&2
	exit 1
fi
echo "check-core: ok, $(echo "$files" | wc -l) files in $CORE free of PostgreSQL headers and calls"

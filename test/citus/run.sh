#!/bin/bash
# Citus: with an installed Citus (the Citus project's own packages, see
# docs/citus.md), start a coordinator and two workers on loopback ports, run
# test/citus/citus.sql (pgTAP) on the coordinator, and stop and remove the
# cluster whatever happens.  Nothing here downloads or builds Citus: without
# it installed, the test is skipped with a message.  make citus; root (it
# runs the servers as postgres).
#   test/citus/run.sh [sql file]     (default test/citus/citus.sql)
#   CITUS_PSQL=1 test/citus/run.sh bench/citus_scale.sql   (a script, through psql)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
SQL=${1:-test/citus/citus.sql}
PG_CONFIG=${PG_CONFIG:-pg_config}
BIN=$($PG_CONFIG --bindir)

if [ "$(id -u)" != 0 ]; then
	echo "citus: needs root; skipped"
	exit 0
fi
if [ ! -f "$($PG_CONFIG --pkglibdir)/citus.so" ]; then
	echo "citus: Citus is not installed for PostgreSQL $($PG_CONFIG --version | sed -E 's/^PostgreSQL ([0-9.]+).*/\1/'); skipped (install it from the Citus packages: see docs/citus.md)"
	exit 0
fi

work=$(mktemp -d)
chmod 755 "$work"
chown postgres "$work"
base=${CITUS_PORT:-$(( ${PGPORT:-5432} + 300 ))}
ports=($base $((base + 1)) $((base + 2)))
stop() {
	for i in 0 1 2; do
		[ -f "$work/n$i/postmaster.pid" ] && runuser -u postgres -- "$BIN/pg_ctl" -D "$work/n$i" -m immediate stop >/dev/null 2>&1 || true
	done
	rm -rf "$work"
}
trap stop EXIT
for i in 0 1 2; do
	mkdir "$work/n$i"
	chown postgres "$work/n$i"
	runuser -u postgres -- "$BIN/initdb" -D "$work/n$i" -A trust -E UTF8 --locale=C.UTF-8 --no-sync >/dev/null
	cat >> "$work/n$i/postgresql.conf" <<CONF
port = ${ports[$i]}
listen_addresses = 'localhost'
unix_socket_directories = '$work'
shared_preload_libraries = 'citus'
max_prepared_transactions = 50
fsync = off

CONF
	runuser -u postgres -- "$BIN/pg_ctl" -D "$work/n$i" -l "$work/n$i/log" -w start >/dev/null || { cat "$work/n$i/log" >&2; exit 1; }
done
export PGHOST=$work PGUSER=postgres PGDATABASE=postgres PGPORT=${ports[0]}
for i in 1 2; do
	psql -X -q -v ON_ERROR_STOP=1 -p "${ports[$i]}" -c "CREATE EXTENSION citus" >/dev/null
done
psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE EXTENSION citus;
SELECT citus_set_coordinator_host('localhost', ${ports[0]});
SELECT citus_add_node('localhost', ${ports[1]});
SELECT citus_add_node('localhost', ${ports[2]});
SQL
echo "citus: coordinator on port ${ports[0]}, workers on ${ports[1]} and ${ports[2]}"
chmod -R o+rX test models 2>/dev/null || true
if [ -n "${CITUS_PSQL:-}" ]; then
	# a script (bench/citus_scale.sql) rather than a test: psql, with the workers' ports
	psql -X -v ON_ERROR_STOP=1 -v w1="${ports[1]}" -v w2="${ports[2]}" -f "$SQL" || { tail -20 "$work"/n*/log >&2; exit 1; }
	exit 0
fi
pg_prove -v -d postgres "$SQL" || {
	tail -20 "$work"/n*/log >&2
	exit 1
}

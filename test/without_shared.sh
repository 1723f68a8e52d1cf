#!/bin/sh
# The tests whose results can change without ../shared (make test-without-shared runs this with it
# hidden, in a server of its own): the manual's examples, the pgTAP files that name it, and a jobs
# scenario, whose sentences then come from a small grammar.
set -e
cd "$(dirname "$0")/.."
make -s doctest
make -s prove PROVE_FILES="$(grep -l '\.\./shared\|shared/data' test/pgtap/*.sql | tr '\n' ' ')"
/usr/bin/python3 test/jobs/run.py --only 2

#!/bin/sh
# Install what building and testing the extension needs on Debian 12 (as root).
#   tools/install-deps.sh         build + test dependencies
#   tools/install-deps.sh --dev   also PyTorch & co., to regenerate fixtures and run bench/
set -eu
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
PKGS="build-essential postgresql-15 postgresql-server-dev-15 postgresql-common libopenblas-dev libicu-dev libxml2-dev
      postgresql-15-pgtap libtap-parser-sourcehandler-pgtap-perl chromium
      clang libclang-rt-14-dev llvm python3 python3-psycopg2 git"
# clang, libclang-rt, llvm (its symbolizer): make sanitize
# and make sanitize-server; python3 and git: make mutation; python3-psycopg2: make jobs
if [ "${1:-}" = "--dev" ]; then
	PKGS="$PKGS python3-torch python3-numpy python3-sentencepiece python3-nltk sentencepiece libdnnl-dev"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $PKGS >/dev/null
echo "dependencies installed"

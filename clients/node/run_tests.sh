#!/bin/sh
# The Node client's suite from a clean clone: npm ci (the versions
# package-lock.json pins), tsc, then node --test on test/*.test.js, each file
# against hourglassd processes of its own (HOURGLASSD names the binary;
# HOURGLASS_ETCD etcd, /usr/bin/etcd by default; HOURGLASS_OPENSSL openssl).
#
#   clients/node/run_tests.sh [WORK_DIR]
#
# With WORK_DIR (ctest passes one in the build tree) the package is copied
# there first, so the source tree gets no node_modules or dist; without, it
# runs in place (both are in .gitignore).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
: "${HOURGLASSD:?set HOURGLASSD to the hourglassd binary}"
command -v node >/dev/null || { echo "run_tests.sh: no node: install nodejs and npm (deploy/setup.sh --test does)" >&2; exit 1; }
command -v npm >/dev/null || { echo "run_tests.sh: no npm: install npm (deploy/setup.sh --test does)" >&2; exit 1; }

dir=$here
if [ $# -ge 1 ]; then
  dir=$1
  mkdir -p "$dir"
  # What the package is made of; node_modules stays between runs (npm ci
  # replaces it when the lock file changed), dist is built again.
  rm -rf "$dir/src" "$dir/test" "$dir/proto" "$dir/dist"
  cp -R "$here/src" "$here/test" "$dir/"
  cp "$here/package.json" "$here/package-lock.json" "$here/tsconfig.json" "$dir/"
fi
# The API the package loads: this checkout's (scripts/copy_protos.js).
rm -rf "$dir/proto"
mkdir -p "$dir/proto/hourglass/v1"
cp "$here"/../../api/hourglass/v1/*.proto "$dir/proto/hourglass/v1/"
cd "$dir"

# npm ci again only when the lock file changed since the last one here.
if ! cmp -s package-lock.json node_modules/.hourglass-installed-lock 2>/dev/null; then
  npm ci --no-audit --no-fund --loglevel=error
  cp package-lock.json node_modules/.hourglass-installed-lock
fi
npx --no-install tsc -p tsconfig.json
# Each file starts its own brokers (the cluster file, etcd and three nodes)
# on ports the system chose, so files may run side by side (node --test runs
# as many at once as the machine has cores, less one).
exec node --test test/*.test.js

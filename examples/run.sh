#!/usr/bin/env bash
# Builds examples/ as a project of its own against Hourglass installed from a
# build tree into a temporary prefix, and runs it against an hourglassd (the
# installed one) that it starts on a free loopback port. Exits 0 when the
# example did. The test ExampleOutOfTree runs it; so may you:
#
#   examples/run.sh [--build-dir DIR] [-- CMAKE_ARGS...]
#
# --build-dir: the configured and built tree to install from. Default
#   build/dev under the repository.
# CMAKE_ARGS go to the example's configure (the test passes the compiler and
#   flags of the tree, e.g. sanitizers, so that the two link together).
# Everything lives in a temporary directory, removed at exit unless
# HOURGLASS_EXAMPLE_KEEP=1.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$repo/build/dev
cmake_args=()
while (($# > 0)); do
  case $1 in
    --build-dir) build_dir=${2:?}; shift 2 ;;
    --build-dir=*) build_dir=${1#*=}; shift ;;
    --) shift; cmake_args=("$@"); break ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

log() { echo "examples/run.sh: $*"; }

# shellcheck source=examples/lib.sh
source "$repo/examples/lib.sh"
example_workdir example

prefix=$work/prefix
log "installing $build_dir into $prefix"
cmake --install "$build_dir" --prefix "$prefix" >"$work/install.log"

log "building examples/ against it"
cmake -S "$repo/examples" -B "$work/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" "${cmake_args[@]}" >"$work/configure.log" ||
  { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" >"$work/build.log" ||
  { cat "$work/build.log"; exit 1; }

# The installed broker, on a port the OS picks.
example_broker "$prefix/bin/hourglassd"
log "hourglassd listens on 127.0.0.1:$port"

"$work/build/delayed_hello" "127.0.0.1:$port"

example_broker_stop
log "PASS"

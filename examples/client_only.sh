#!/usr/bin/env bash
# Builds the C++ client library alone (-DHOURGLASS_CLIENT_ONLY=ON) from this
# repository, installs it into a temporary prefix, checks that only the
# client's files were installed (no daemon files) and that nothing but gRPC,
# Protobuf and abseil was looked for, then builds examples/ against that
# install and runs it against an hourglassd started on a free loopback port.
# Exits 0 when all of it did. The test ClientOnlyBuild runs it; so may you:
#
#   examples/client_only.sh [--hourglassd PATH] [-- CMAKE_ARGS...]
#
# --hourglassd: the broker to run the example against. Default
#   build/dev/cmd/hourglassd/hourglassd under the repository.
# CMAKE_ARGS go to both configures (the client's and the example's), e.g.
#   -DCMAKE_CXX_COMPILER=clang++.
# Everything lives in a temporary directory, removed at exit unless
# HOURGLASS_EXAMPLE_KEEP=1. Builds with -j2 (HOURGLASS_CLIENT_ONLY_JOBS).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
hourglassd=$repo/build/dev/cmd/hourglassd/hourglassd
cmake_args=()
while (($# > 0)); do
  case $1 in
    --hourglassd) hourglassd=${2:?}; shift 2 ;;
    --hourglassd=*) hourglassd=${1#*=}; shift ;;
    --) shift; cmake_args=("$@"); break ;;
    *) echo "client_only.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
jobs=${HOURGLASS_CLIENT_ONLY_JOBS:-2}

log() { echo "examples/client_only.sh: $* (${SECONDS} s)"; }
fail() { echo "examples/client_only.sh: FAIL: $*" >&2; exit 1; }
# run LOG CMD...: runs CMD with its output in $work/LOG, shown if it fails.
run() {
  local out=$work/$1; shift
  "$@" >"$out" 2>&1 || { cat "$out"; fail "$* (log above)"; }
}

if [[ ! -x $hourglassd ]]; then
  echo "client_only.sh: no hourglassd at $hourglassd (build it, or pass" \
       "--hourglassd PATH)" >&2
  exit 2
fi

# shellcheck source=examples/lib.sh
source "$repo/examples/lib.sh"
example_workdir client-only

build=$work/build
prefix=$work/prefix

log "configuring the client alone in $build"
run configure.log cmake -S "$repo" -B "$build" -G Ninja \
  -DHOURGLASS_CLIENT_ONLY=ON "${cmake_args[@]}"

# Only gRPC, Protobuf and abseil (and what gRPC's own package looks for):
# no cache entry names a server-only dependency. HOURGLASS_* are the
# project's own options (HOURGLASS_JEMALLOC is ignored here).
looked_up=$(grep -v -e '^//' -e '^#' -e '^HOURGLASS_' "$build/CMakeCache.txt" |
  grep -Ei 'rocksdb|prometheus|spdlog|fmt_|cli11|httplib|gtest|gmock|benchmark|jemalloc|etcd|snappy|zstd|civetweb' ||
  true)
if [[ -n $looked_up ]]; then
  echo "$looked_up"
  fail "the client-only configure looked for a server-only dependency (above)"
fi

log "building it (-j$jobs)"
run build.log cmake --build "$build" --parallel "$jobs"

log "installing it into $prefix"
run install.log cmake --install "$build" --prefix "$prefix"
# Every file installed (install_manifest.txt also names any outside the
# prefix) is one of the client's: its libraries, its headers, the generated
# headers and the CMake package. A systemd unit, sysusers file, flag file,
# documentation, completion or program is a failure.
installed=$(sed "s|^$prefix/||" "$build/install_manifest.txt" | sort)
echo "$installed" | sed 's/^/  /'
unexpected=$(echo "$installed" | grep -Ev \
  -e '^include/hourglass/(client|v1)/[^/]+\.h$' \
  -e '^lib[^/]*/([^/]+/)?libhourglass_(client|api_proto|shard_hash)\.a$' \
  -e '^lib[^/]*/([^/]+/)?cmake/Hourglass/[^/]+\.cmake$' || true)
if [[ -n $unexpected ]]; then
  echo "$unexpected"
  fail "installed files that are not the client's (above)"
fi
for want in 'include/hourglass/client/publisher.h' \
            'include/hourglass/v1/broker.grpc.pb.h' \
            'libhourglass_client.a' 'libhourglass_api_proto.a' \
            'libhourglass_shard_hash.a' 'cmake/Hourglass/HourglassConfig.cmake'; do
  grep -q -- "$want\$" <<<"$installed" || fail "nothing installed $want"
done

log "building examples/ against it"
run example-configure.log cmake -S "$repo/examples" -B "$work/example" \
  -G Ninja -DCMAKE_PREFIX_PATH="$prefix" "${cmake_args[@]}"
run example-build.log cmake --build "$work/example" --parallel "$jobs"
example=$work/example/delayed_hello
server_libs=$(ldd "$example" |
  grep -Ei 'rocksdb|prometheus|spdlog|libfmt|jemalloc|httplib|snappy|zstd|civetweb' ||
  true)
if [[ -n $server_libs ]]; then
  echo "$server_libs"
  fail "delayed_hello links a server-only library (above)"
fi

# hourglassd on a port the OS picks.
example_broker "$hourglassd" || fail "hourglassd did not start listening (log above)"
log "running delayed_hello against hourglassd on 127.0.0.1:$port"
"$example" "127.0.0.1:$port" || fail "delayed_hello exited $?"

example_broker_stop || fail "hourglassd exited $? on SIGTERM"
log "PASS"

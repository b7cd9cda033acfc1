#!/usr/bin/env bash
# Installs the Debian 12 packages that Hourglass needs to build, run and test.
#
# Idempotent: when every package is present it prints nothing and exits 0.
# Run as root (or with sudo available) on Debian 12; it uses Debian's own
# archive only.
set -euo pipefail

packages=(
  # Toolchain.
  g++ cmake ninja-build pkg-config
  # Libraries the broker links.
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librocksdb-dev libabsl-dev libspdlog-dev libcli11-dev libcpp-httplib-dev
  prometheus-cpp-dev libssl-dev
  # Tests and benchmarks.
  libgtest-dev libgmock-dev libbenchmark-dev grpc-proto openssl
  # The Python client (clients/python): its runtime and its tests.
  python3-grpcio python3-protobuf python3-pytest
  # The fuzz and tsan presets: clang with its sanitizer and libFuzzer runtimes.
  clang libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "installed" ]] || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

if ((EUID == 0)); then
  sudo=()
elif command -v sudo >/dev/null; then
  sudo=(sudo)
else
  echo "setup.sh: missing packages (${missing[*]}) and not root; run as root or install sudo" >&2
  exit 1
fi

echo "setup.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

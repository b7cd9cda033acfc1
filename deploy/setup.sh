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
  # hourglassd's memory allocator (cmd/hourglassd/allocator.h).
  libjemalloc-dev
  # Tests and benchmarks.
  libgtest-dev libgmock-dev libbenchmark-dev grpc-proto openssl
  # Cluster mode's tests (tests/cluster) start a real etcd, /usr/bin/etcd,
  # on loopback ports of their own. (Where systemd runs, the package also
  # enables an etcd service on the default ports; the tests do not use it.)
  etcd-server
  # The Python client (clients/python): its runtime and its tests.
  python3-grpcio python3-protobuf python3-pytest
  # The web console embeds Chart.js from libjs-chart.js at build time; its
  # browser tests (tests/console) drive headless Chromium with Selenium.
  libjs-chart.js chromium chromium-driver python3-selenium
  # The fuzz and tsan presets: clang with its sanitizer and libFuzzer runtimes.
  clang libclang-rt-14-dev
  # tests/deploy: Debian's python3 with its YAML parser reads the deploy
  # files; systemd-analyze verifies the unit, systemd-sysusers its user;
  # curl runs the Kubernetes cluster's zone init container against a
  # stand-in API server (the image installs it for that container).
  python3 python3-yaml systemd curl
)

# promtool checks and unit-tests deploy/prometheus/alerts.yml (tests/deploy).
# Debian ships it only inside its prometheus package, whose installation
# also enables and starts a Prometheus server; so the binary alone is taken
# from that package (apt-get download, checked against the archive's
# signed index like any install) into a directory of its own, off PATH.
# A promtool on PATH (an installed prometheus package) is used instead.
promtool_dir=/usr/local/lib/hourglass
need_promtool=0
if ! command -v promtool >/dev/null && [[ ! -x $promtool_dir/promtool ]]; then
  need_promtool=1
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "installed" ]] || missing+=("$p")
done
((${#missing[@]} == 0 && need_promtool == 0)) && exit 0

if ((EUID == 0)); then
  sudo=()
elif command -v sudo >/dev/null; then
  sudo=(sudo)
else
  ((need_promtool)) && missing+=(promtool)
  echo "setup.sh: missing packages (${missing[*]}) and not root; run as root or install sudo" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
if ((${#missing[@]} > 0)); then
  echo "setup.sh: installing ${missing[*]}" >&2
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ((need_promtool)); then
  echo "setup.sh: installing promtool from Debian's prometheus package into $promtool_dir" >&2
  work=$(mktemp -d)
  trap '"${sudo[@]}" rm -rf "$work"' EXIT
  # Downloaded by apt's sandbox user, who must be able to reach and write it.
  chmod 0755 "$work"
  mkdir -m 0755 "$work/deb"
  if id _apt >/dev/null 2>&1; then "${sudo[@]}" chown _apt "$work/deb"; fi
  (cd "$work/deb" && "${sudo[@]}" apt-get download -qq prometheus)
  dpkg-deb --fsys-tarfile "$work"/deb/prometheus_*.deb |
    tar -x -C "$work" ./usr/bin/promtool
  "${sudo[@]}" install -D -m 0755 "$work/usr/bin/promtool" "$promtool_dir/promtool"
fi

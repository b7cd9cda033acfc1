#!/usr/bin/env bash
# Installs the Debian 12 packages that Hourglass needs to build and run;
# with --test, also what its tests and benchmarks need.
#
#   deploy/setup.sh          build and run (the Quick start's first command)
#   deploy/setup.sh --test   build, run and test (its second command)
#
# Idempotent: when every package is present it prints nothing and exits 0.
# Run as root (or with sudo available) on Debian 12; it uses Debian's own
# archive only.
set -euo pipefail

with_tests=0
case "${1:-}" in
  "") ;;
  --test) with_tests=1 ;;
  -h | --help)
    sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "setup.sh: unknown argument \"$1\" (--test adds what the tests need)" >&2
    exit 2
    ;;
esac

packages=(
  # Toolchain.
  g++ cmake ninja-build pkg-config
  # Libraries the broker links.
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librocksdb-dev libabsl-dev libspdlog-dev libcli11-dev libcpp-httplib-dev
  prometheus-cpp-dev libssl-dev
  # hourglassd's memory allocator (cmd/hourglassd/allocator.h).
  libjemalloc-dev
  # The web console embeds Chart.js from libjs-chart.js at build time.
  libjs-chart.js
  # Cluster mode (--etcd) runs against etcd. Where systemd runs, Debian's
  # package also starts an etcd service on 127.0.0.1:2379; setup.sh stops
  # and disables it when it installs the package (below), so the README's
  # cluster on one machine starts an etcd of its own there.
  etcd-server
  # The Python client (clients/python) at run time.
  python3-grpcio python3-protobuf
)
test_packages=(
  # Tests and benchmarks.
  libgtest-dev libgmock-dev libbenchmark-dev grpc-proto openssl
  # The Python client's tests, and its install into a virtual environment
  # (clients/python/tests/install_check.sh).
  python3-pytest python3-venv python3-setuptools python3-wheel
  # The web console's browser tests (tests/console) drive headless Chromium
  # with Selenium.
  chromium chromium-driver python3-selenium
  # The fuzz and tsan presets: clang with its sanitizer and libFuzzer runtimes.
  clang libclang-rt-14-dev
  # tests/deploy: Debian's python3 with its YAML parser reads the deploy
  # files; systemd-analyze verifies the unit, systemd-sysusers its user;
  # curl runs the Kubernetes cluster's zone init container against a
  # stand-in API server (the image installs it for that container).
  python3 python3-yaml systemd curl
)
((with_tests)) && packages+=("${test_packages[@]}")
# The Node.js client's tests (clients/node/run_tests.sh: npm ci, tsc,
# node --test) need node (18 or later) and npm: Debian's nodejs and npm
# when the commands are missing. A Node installed otherwise (NodeSource's
# package, which bundles npm and conflicts with Debian's) is used as it is.
if ((with_tests)); then
  command -v node >/dev/null || packages+=(nodejs)
  command -v npm >/dev/null || packages+=(npm)
fi

# promtool checks and unit-tests deploy/prometheus/alerts.yml (tests/deploy).
# Debian ships it only inside its prometheus package, whose installation
# also enables and starts a Prometheus server; so the binary alone is taken
# from that package (apt-get download, checked against the archive's
# signed index like any install) into a directory of its own, off PATH.
# A promtool on PATH (an installed prometheus package) is used instead.
promtool_dir=/usr/local/lib/hourglass
need_promtool=0
if ((with_tests)) && ! command -v promtool >/dev/null && [[ ! -x $promtool_dir/promtool ]]; then
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
# The etcd service the package just started (where systemd runs) would hold
# 127.0.0.1:2379, which the README's cluster walk-through gives its own etcd.
# An etcd that was installed before is left as it was.
if [[ " ${missing[*]} " == *" etcd-server "* ]] && [[ -d /run/systemd/system ]]; then
  "${sudo[@]}" systemctl disable --now etcd.service >/dev/null 2>&1 || true
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

#!/usr/bin/env bash
# tests/bench/ab.sh: two builds of Hourglass (before and after a change) on
# the hourglass side of compare.sh's workloads a-d, interleaved so that both
# see the same machine: each workload runs on A, then on B, then again on A
# and B for --rounds rounds, each on a fresh hourglassd and data directory.
#
#   tests/bench/ab.sh --a=BUILD_DIR --b=BUILD_DIR [--rounds=N] [--quick]
#                     [--publish=N] [--hot=N] [--pending=N] [--steady=DURATION]
#                     [--bench=COMMAND] [--out=DIR]
#
# BUILD_DIR is a configured and built tree (release preset) holding
# cmd/hourglassd/hourglassd and the load generator: cmd/hourglass-bench/
# hourglass-bench, or, in trees from before it became its own program,
# `cmd/hourglass/hourglass bench`. Sizes default to compare.sh's; --quick
# as there (200k publish, 15 s steady, 100k hot, 1M pending). --bench runs
# one load generator against both builds (say B's), so that only the broker
# differs; by default each build's own runs against it.
#
# Prints a Markdown table: per workload and build, the median over rounds
# (and the range), and B's change against A. Raw JSON per run in --out
# (default: a new directory under /tmp). Listens on 127.0.0.1 only.
set -euo pipefail

A=""
B=""
ROUNDS=2
PUBLISH=1000000
HOT=1000000
PENDING=10000000
STEADY=60s
OUT=""
BENCH=""
ARGS="$*"
for arg in "$@"; do
  case "$arg" in
    --a=*) A="${arg#*=}" ;;
    --b=*) B="${arg#*=}" ;;
    --rounds=*) ROUNDS="${arg#*=}" ;;
    --quick) HOT=100000 PENDING=1000000 STEADY=15s PUBLISH=200000 ;;
    --publish=*) PUBLISH="${arg#*=}" ;;
    --hot=*) HOT="${arg#*=}" ;;
    --pending=*) PENDING="${arg#*=}" ;;
    --steady=*) STEADY="${arg#*=}" ;;
    --out=*) OUT="${arg#*=}" ;;
    --bench=*) BENCH="${arg#*=}" ;;
    -h|--help) sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ab.sh: unknown argument \"$arg\" (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$A" ] || [ -z "$B" ]; then
  echo "ab.sh: --a and --b are required" >&2
  exit 2
fi

log() { echo "ab.sh: $*" >&2; }

# The daemon and the load generator of a build tree, as a command line.
daemon_of() { echo "$1/cmd/hourglassd/hourglassd"; }
bench_of() {
  if [ -n "$BENCH" ]; then
    echo "$BENCH"
  elif [ -x "$1/cmd/hourglass-bench/hourglass-bench" ]; then
    echo "$1/cmd/hourglass-bench/hourglass-bench"
  else
    echo "$1/cmd/hourglass/hourglass bench"
  fi
}
for dir in "$A" "$B"; do
  [ -x "$(daemon_of "$dir")" ] || { log "no hourglassd in $dir"; exit 1; }
done

[ -n "$OUT" ] || OUT="$(mktemp -d /tmp/hourglass-ab-XXXXXX)"
mkdir -p "$OUT"
WORK="$(mktemp -d /tmp/hourglass-ab-data-XXXXXX)"
log "results in $OUT"

SERVER_PID=""
stop_server() {
  if [ -n "$SERVER_PID" ]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  SERVER_PID=""
  rm -rf "$WORK/data"
}
trap 'stop_server; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

PORT=""
start() {  # BUILD_DIR NAME
  stop_server
  PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  "$(daemon_of "$1")" --listen="127.0.0.1:$PORT" --data_dir="$WORK/data" \
    --metrics_listen=127.0.0.1:0 --durability=sync >"$OUT/$2.hourglassd.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 200); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then return 0; fi
    sleep 0.05
  done
  log "hourglassd of $1 does not listen"
  exit 1
}

run() {  # BUILD_DIR NAME BENCH_ARGS...
  local dir="$1" name="$2"
  shift 2
  log "$name: $*"
  # shellcheck disable=SC2046  # bench_of may be "hourglass bench": two words.
  $(bench_of "$dir") --addr="127.0.0.1:$PORT" --timeout=60s --json \
    --durability=sync "$@" >"$OUT/$name.json" 2>"$OUT/$name.err" ||
    log "$name failed: $(tail -n 1 "$OUT/$name.err")"
}

# The workloads, as compare.sh runs them. Each: KEY then the bench's flags.
STEADY_S="${STEADY%s}"
HOT_S=$(( HOT / 20000 + 10 ))
WORKLOADS=(
  "a-batched8|--consumers=0 --count=$PUBLISH --batch=100 --producers=2 --concurrency=8 --delay=1h"
  "a-batched32|--consumers=0 --count=$PUBLISH --batch=100 --producers=2 --concurrency=32 --delay=1h"
  "a-unbatched|--consumers=0 --count=$(( PUBLISH / 5 )) --batch=1 --producers=2 --concurrency=64 --delay=1h"
  "a-stream|--consumers=0 --count=$(( PUBLISH / 5 )) --batch=1 --producers=2 --concurrency=64 --delay=1h --publish=stream"
  "b-steady|--rate=10000 --count=$(( STEADY_S * 10000 )) --batch=10 --producers=2 --concurrency=16 --consumers=1 --delay=1s..10s"
  "c-hot|--count=$HOT --batch=1000 --producers=2 --concurrency=8 --consumers=2 --delay=hot:${HOT_S}s"
  "c-hot-single|--count=$HOT --batch=1000 --producers=2 --concurrency=8 --consumers=2 --consume=single --delay=hot:${HOT_S}s"
  "d-pending|--consumers=0 --count=$PENDING --batch=1000 --producers=2 --concurrency=8 --delay=24h"
)

LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$ROUNDS"); do
  for w in "${WORKLOADS[@]}"; do
    key="${w%%|*}"
    read -r -a flags <<<"${w#*|}"
    for side in A B; do
      dir="$A"; [ "$side" = B ] && dir="$B"
      start "$dir" "$key-$side-$round"
      run "$dir" "$key-$side-$round" "${flags[@]}"
      if [ "$key" = d-pending ]; then
        echo "{\"rss_kib\":$(ps -o rss= -p "$SERVER_PID" | tr -d ' '),\"disk_bytes\":$(du -sb "$WORK/data" | cut -f1)}" \
          >"$OUT/$key-$side-$round.server.json"
      fi
      stop_server
    done
  done
done

# The table: median (min-max) per side, and B against A.
python3 - "$OUT" "$ROUNDS" "$A" "$B" "$ARGS" "$LOAD_BEFORE" <<'EOF'
import json, os, statistics, sys
out, rounds, a, b, args, load = sys.argv[1], int(sys.argv[2]), *sys.argv[3:]

def value(name, expr):
    path = os.path.join(out, name)
    try:
        r = json.load(open(path))
    except (OSError, ValueError):
        return None
    for part in expr.split("."):
        r = r.get(part) if isinstance(r, dict) else None
    return float(r) if r is not None else None

ROWS = [
    ("a. batches of 100, 8 in flight, msg/s", "a-batched8", "json", "publish_rate", "higher"),
    ("a. batches of 100, 32 in flight, msg/s", "a-batched32", "json", "publish_rate", "higher"),
    ("a. unbatched calls, 64 in flight, msg/s", "a-unbatched", "json", "publish_rate", "higher"),
    ("a. unbatched on PublishStream, 64 in flight, msg/s", "a-stream", "json", "publish_rate", "higher"),
    ("b. steady 10k/s: lateness p50, ms", "b-steady", "json", "lateness_ms.p50", "lower"),
    ("b. steady 10k/s: lateness p99, ms", "b-steady", "json", "lateness_ms.p99", "lower"),
    ("b. steady 10k/s: lateness p99.9, ms", "b-steady", "json", "lateness_ms.p99_9", "lower"),
    ("b. steady 10k/s: early deliveries", "b-steady", "json", "early", "lower"),
    ("c. hot second: all delivered after, ms", "c-hot", "json", "lateness_ms.max", "lower"),
    ("c. hot second on Subscribe: all delivered after, ms", "c-hot-single", "json", "lateness_ms.max", "lower"),
    ("d. pending: publish, msg/s", "d-pending", "json", "publish_rate", "higher"),
    ("d. pending: server RSS, MiB", "d-pending", "server.json", "rss_kib", "lower"),
    ("d. pending: bytes on disk, MiB", "d-pending", "server.json", "disk_bytes", "lower"),
]

def fmt(v):
    return "-" if v is None else (f"{v:,.0f}" if abs(v) >= 100 else f"{v:.2f}")

print(f"`tests/bench/ab.sh {args}`; A = `{a}`, B = `{b}`; {rounds} rounds, interleaved; load average before: {load}.")
print()
print("| workload | A: median (range) | B: median (range) | B vs A |")
print("| --- | ---: | ---: | ---: |")
for label, key, kind, expr, better in ROWS:
    cells = []
    medians = []
    for side in "AB":
        vs = [value(f"{key}-{side}-{r}.{kind}", expr) for r in range(1, rounds + 1)]
        vs = [v for v in vs if v is not None]
        if kind == "server.json":
            vs = [v / (1024 if expr == "rss_kib" else 1048576) for v in vs]
        m = statistics.median(vs) if vs else None
        medians.append(m)
        cells.append("-" if m is None else f"{fmt(m)} ({fmt(min(vs))}–{fmt(max(vs))})")
    ma, mb = medians
    change = "n/a" if not ma or mb is None else f"{(mb - ma) / ma * 100:+.1f} %"
    print(f"| {label} | {cells[0]} | {cells[1]} | {change} |")
EOF

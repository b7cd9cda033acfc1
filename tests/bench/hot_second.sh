#!/usr/bin/env bash
# tests/bench/hot_second.sh: the hot second (compare.sh's row c) on two
# builds, A and B, interleaved round by round on fresh brokers, with the CPU
# each broker's dispatcher thread (hg-dispatcher) and the whole broker used.
# The dispatcher's step is what a hot second waits on, so its CPU time shows
# a change to it with less noise than the latency does.
#
#   tests/bench/hot_second.sh --a=BUILD_DIR --b=BUILD_DIR [--rounds=N]
#       [--hot=N] [--consume=batches|single] [--bench=COMMAND]
#
# BUILD_DIR holds cmd/hourglassd/hourglassd (release preset). --bench is
# the load generator for both (default: B's cmd/hourglass-bench/
# hourglass-bench). Defaults: 5 rounds, 300,000 messages, SubscribeBatches.
# Prints one line per run and the medians. Listens on 127.0.0.1 only.
set -euo pipefail

A="" B="" ROUNDS=5 HOT=300000 CONSUME=batches BENCH=""
for arg in "$@"; do
  case "$arg" in
    --a=*) A="${arg#*=}" ;;
    --b=*) B="${arg#*=}" ;;
    --rounds=*) ROUNDS="${arg#*=}" ;;
    --hot=*) HOT="${arg#*=}" ;;
    --consume=*) CONSUME="${arg#*=}" ;;
    --bench=*) BENCH="${arg#*=}" ;;
    -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "hot_second.sh: unknown argument \"$arg\" (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$A" ] || [ -z "$B" ]; then
  echo "hot_second.sh: --a and --b are required" >&2
  exit 2
fi
[ -n "$BENCH" ] || BENCH="$B/cmd/hourglass-bench/hourglass-bench"
WORK="$(mktemp -d /tmp/hourglass-hot-XXXXXX)"
PID=""
cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# CPU seconds (user + system) of /proc/PID/stat-like file $1.
cpu_of() { awk -v tck="$(getconf CLK_TCK)" '{ print ($14 + $15) / tck }' "$1"; }

run() {  # BUILD_DIR NAME -> "NAME latency_max_ms dispatcher_cpu_s broker_cpu_s"
  local port
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  rm -rf "$WORK/data"
  "$1/cmd/hourglassd/hourglassd" --listen="127.0.0.1:$port" --data_dir="$WORK/data" \
    --metrics_listen=127.0.0.1:0 --durability=sync >"$WORK/$2.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 200); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
    sleep 0.05
  done
  $BENCH --addr="127.0.0.1:$port" --timeout=60s --json --durability=sync \
    --count="$HOT" --batch=1000 --producers=2 --concurrency=8 --consumers=2 \
    --consume="$CONSUME" --delay="hot:$(( HOT / 20000 + 10 ))s" >"$WORK/$2.json" 2>"$WORK/$2.err"
  local dispatcher=0 task
  for task in /proc/"$PID"/task/*; do
    if [ "$(cat "$task/comm")" = hg-dispatcher ]; then dispatcher="$(cpu_of "$task/stat")"; fi
  done
  local broker
  broker="$(cpu_of "/proc/$PID/stat")"
  kill "$PID"; wait "$PID" || true
  PID=""
  python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(sys.argv[2], r["lateness_ms"]["max"], sys.argv[3], sys.argv[4])' \
    "$WORK/$2.json" "$2" "$dispatcher" "$broker"
}

echo "# hot_second.sh $*; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# run all_delivered_after_ms dispatcher_cpu_s broker_cpu_s"
for round in $(seq 1 "$ROUNDS"); do
  run "$A" "A$round"
  run "$B" "B$round"
done | tee "$WORK/runs.txt"
python3 - "$WORK/runs.txt" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
for side in "AB":
    got = [list(map(float, r[1:])) for r in rows if r[0].startswith(side)]
    med = [statistics.median(c) for c in zip(*got)]
    print(f"{side}: median all delivered after {med[0]:.0f} ms "
          f"(range {min(g[0] for g in got):.0f}-{max(g[0] for g in got):.0f}), "
          f"dispatcher {med[1]:.2f} s, broker {med[2]:.2f} s CPU")
PY

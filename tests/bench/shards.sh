#!/usr/bin/env bash
# tests/bench/shards.sh: what more shards on one node cost (issue 22,
# benchmark a). A cluster of one node (--replication_factor=1
# --min_insync=1) is created with each --shards count in turn and loaded the
# same way, with 16 topics (hourglass-bench --topics=16) spread over its
# shards:
#   1. publish as fast as it goes: --count messages in batches of 100, 16
#      calls in flight; the rate, and hourglassd's CPU time per message;
#   2. steady load: --rate msg/s for --steady seconds, each due 1 s after it
#      is published, with a consumer per topic; lateness (arrival minus
#      deliver_at) p50 and p99, and hourglassd's CPU time per message;
#   3. hourglassd's threads and resident memory at the end.
# On a 2-core machine more shards cannot add throughput; what must hold is
# that the CPU time per message and the lateness stay flat as shards are
# added (what the shared cores explain aside). The counts are interleaved
# --rounds times; the medians are printed last.
#
#   tests/bench/shards.sh [--build=build/release] [--shards=1,4,16]
#       [--rounds=2] [--count=300000] [--rate=20000] [--steady=20]
#       [--durability=sync]
#
# Needs etcd (deploy/setup.sh installs etcd-server).
set -euo pipefail

BUILD=build/release SHARDS=1,4,16 ROUNDS=2 COUNT=300000 RATE=20000 STEADY=20
DURABILITY=sync
for arg in "$@"; do
  case "$arg" in
    --build=*) BUILD="${arg#*=}" ;;
    --shards=*) SHARDS="${arg#*=}" ;;
    --rounds=*) ROUNDS="${arg#*=}" ;;
    --count=*) COUNT="${arg#*=}" ;;
    --rate=*) RATE="${arg#*=}" ;;
    --steady=*) STEADY="${arg#*=}" ;;
    --durability=*) DURABILITY="${arg#*=}" ;;
    -h|--help) sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "shards.sh: unknown argument \"$arg\" (see --help)" >&2; exit 2 ;;
  esac
done
source "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh"

TICKS="$(getconf CLK_TCK)"
cpu_seconds() {  # PID -> its user + system CPU seconds so far
  awk -v hz="$TICKS" '{ print ($14 + $15) / hz }' "/proc/$1/stat"
}

start_etcd
IFS=, read -r -a COUNTS <<<"$SHARDS"
echo "# shards round publish_msg_s publish_cpu_us_per_msg steady_p50_ms steady_p99_ms steady_cpu_us_per_msg threads rss_mb"
: >"$WORK/runs.txt"
for round in $(seq 1 "$ROUNDS"); do
  for shards in "${COUNTS[@]}"; do
    name="s$shards-r$round"
    "$HOURGLASSD" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 \
      --data_dir="$WORK/$name" --durability="$DURABILITY" \
      --etcd="127.0.0.1:$ETCD_PORT" --cluster="$name" --node_id=a \
      --shards="$shards" --replication_factor=1 --min_insync=1 "$PEER_FLAG" \
      >"$WORK/$name.log" 2>&1 &
    pid=$!
    PIDS[node]=$pid
    addr="127.0.0.1:$(port_of "$WORK/$name.log")"
    # Until every shard has its primary.
    for _ in $(seq 1 600); do
      ready="$("$CLI" --addr="$addr" --json cluster 2>/dev/null | python3 -c '
import json, sys
m = json.load(sys.stdin)
print(sum(1 for s in m.get("shards", []) if s.get("primary")))' 2>/dev/null || echo 0)"
      [ "$ready" = "$shards" ] && break
      sleep 0.05
    done
    [ "$ready" = "$shards" ] || { echo "shards.sh: $name: the shards never all had a primary" >&2; exit 1; }
    # A warm-up, which also waits (retrying) until every shard's engine is
    # open.
    "$BENCH" --addr="$addr" --timeout=30s --json --consumers=0 --topics=16 \
      --count=16000 --batch=100 --retries=20 >"$WORK/$name-warm.json" 2>&1 || {
        echo "shards.sh: $name: the warm-up failed:" >&2; tail -3 "$WORK/$name-warm.json" >&2; exit 1; }

    before="$(cpu_seconds "$pid")"
    "$BENCH" --addr="$addr" --timeout=60s --json --durability="$DURABILITY" --consumers=0 \
      --topics=16 --count="$COUNT" --batch=100 --producers=2 --concurrency=16 \
      >"$WORK/$name-publish.json" 2>"$WORK/$name-publish.err" || {
        echo "shards.sh: $name: the publish run failed:" >&2; tail -3 "$WORK/$name-publish.err" >&2; exit 1; }
    publish_cpu="$(python3 -c "print($(cpu_seconds "$pid") - $before)")"

    before="$(cpu_seconds "$pid")"
    "$BENCH" --addr="$addr" --timeout=60s --json --durability="$DURABILITY" --consumers=16 \
      --topics=16 --rate="$RATE" --duration="${STEADY}s" --delay=1s --batch=100 \
      --producers=2 --concurrency=16 \
      >"$WORK/$name-steady.json" 2>"$WORK/$name-steady.err" || {
        echo "shards.sh: $name: the steady run failed:" >&2; tail -3 "$WORK/$name-steady.err" >&2; exit 1; }
    steady_cpu="$(python3 -c "print($(cpu_seconds "$pid") - $before)")"

    threads="$(awk '/^Threads:/ { print $2 }' "/proc/$pid/status")"
    rss="$(awk '/^VmRSS:/ { printf "%.0f", $2 / 1024 }' "/proc/$pid/status")"
    (python3 - "$WORK/$name-publish.json" "$WORK/$name-steady.json" \
      "$shards" "$round" "$publish_cpu" "$steady_cpu" "$threads" "$rss" <<'PY'
import json, sys
publish, steady = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
shards, rnd, publish_cpu, steady_cpu, threads, rss = sys.argv[3:]
for r, what in ((publish, "publish"), (steady, "steady")):
    if r.get("errors", 0) or r.get("early", 0) or r.get("undelivered", 0):
        sys.exit(f"shards.sh: the {what} run of {shards} shards had errors, early or "
                 f"undelivered messages: {r.get('first_error', '')}")
lateness = steady["lateness_ms"]
print(shards, rnd, round(publish["publish_rate"]),
      round(1e6 * float(publish_cpu) / publish["published"], 1),
      round(lateness["p50"], 2), round(lateness["p99"], 2),
      round(1e6 * float(steady_cpu) / steady["published"], 1), threads, rss)
PY
    ) | tee -a "$WORK/runs.txt"
    kill "$pid"; wait "$pid" 2>/dev/null || true; unset 'PIDS[node]'
    rm -rf "${WORK:?}/$name"
  done
done
python3 - "$WORK/runs.txt" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    if line.startswith("#"): continue
    fields = line.split()
    runs.setdefault(int(fields[0]), []).append([float(f) for f in fields[2:]])
print("# medians: shards publish_msg_s publish_cpu_us_per_msg steady_p50_ms steady_p99_ms steady_cpu_us_per_msg threads rss_mb")
for shards in sorted(runs):
    columns = list(zip(*runs[shards]))
    print("median", shards, *(round(statistics.median(c), 1) for c in columns))
PY

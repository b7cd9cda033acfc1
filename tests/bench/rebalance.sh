#!/usr/bin/env bash
# tests/bench/rebalance.sh: moving a shard's copy to a new node under load
# (issue 22's rebalance benchmark), on this machine's loopback:
#   1. etcd and three hourglassd (a, b, c; one shard, --shards=1
#      --replication_factor=3 --min_insync=2 --durability=sync), then a
#      fourth, d, which holds nothing;
#   2. --count messages published to topic `pending`, due in 1 h;
#   3. a steady load through every node for the rest of the run: --rate
#      msg/s to topic `steady`, due 2 s later, consumed and acked;
#   4. `hourglass cluster drain --node=b` (--drain): the controller adds a copy on d
#      (rebuilt from the primary's checkpoint: the pending messages are past
#      what the primary keeps of its log), waits for it to be in sync, then
#      drops b's. Measured: from the drain to b leaving the replicas; the
#      bytes and files the checkpoint moved (d's log); the steady load's
#      lateness for messages due during the move against the others;
#   5. checks: d holds every pending message (its copy's count, after a and
#      c are stopped and d is promoted), and the steady load's report (every
#      message delivered, none early, lateness p99 through the move).
#
#   tests/bench/rebalance.sh [--build=build/release] [--count=1000000]
#       [--rate=2000] [--drain=b]
#
# --drain=a drains the primary instead: it hands the shard over to an
# in-sync backup first (leader transfer), then its copy moves; the time
# until another node is primary is reported too.
#
# Needs etcd (deploy/setup.sh installs etcd-server).
set -euo pipefail

BUILD=build/release COUNT=1000000 RATE=2000 DRAIN=b
for arg in "$@"; do
  case "$arg" in
    --drain=*) DRAIN="${arg#*=}" ;;
    --build=*) BUILD="${arg#*=}" ;;
    --count=*) COUNT="${arg#*=}" ;;
    --rate=*) RATE="${arg#*=}" ;;
    -h|--help) sed -n '2,29p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "rebalance.sh: unknown argument \"$arg\" (see --help)" >&2; exit 2 ;;
  esac
done
source "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh"
start_etcd

declare -A ADDR=()
start_node() {  # NAME
  "$HOURGLASSD" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 \
    --data_dir="$WORK/$1" --durability=sync --etcd="127.0.0.1:$ETCD_PORT" \
    --lease_ttl=3s --node_id="$1" --shards=1 --min_insync=2 "$PEER_FLAG" >"$WORK/$1.log" 2>&1 &
  PIDS[$1]=$!
  ADDR[$1]="127.0.0.1:$(port_of "$WORK/$1.log")"
}
all_addrs() { local IFS=,; echo "${ADDR[*]}"; }
map() { "$CLI" --addr="$(all_addrs)" --json cluster 2>/dev/null || echo '{}'; }
# Prints FIELD of shard 0 joined by commas (replicas, isr), or "".
shard_field() {
  map | python3 -c 'import json,sys; m=json.load(sys.stdin); s=m.get("shards",[{}]); print(",".join(s[0].get(sys.argv[1],[])) if s else "")' "$1"
}
await_field() {  # FIELD VALUE SECONDS
  for _ in $(seq 1 "$(( $3 * 10 ))"); do
    [ "$(shard_field "$1")" = "$2" ] && return
    sleep 0.1
  done
  echo "rebalance.sh: shard 0's $1 never became $2" >&2; exit 1
}

for n in a b c; do start_node "$n"; done
await_field isr a,b,c 60
start_node d
echo "# cluster: a (primary), b, c; d holds nothing"

echo "# publishing $COUNT messages due in 1 h"
"$BENCH" --addr="${ADDR[a]}" --timeout=60s --json --durability=sync --consumers=0 \
  --topic=pending --count="$COUNT" --batch=1000 --producers=2 --concurrency=8 --delay=1h \
  >"$WORK/preload.json" 2>"$WORK/preload.err" ||
  { echo "rebalance.sh: publishing the pending messages failed:" >&2; tail -5 "$WORK/preload.err" >&2; exit 1; }
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("preload: %d msg/s" % r["publish_rate"])' "$WORK/preload.json"

# The steady load, through every node, for long enough to outlast the move.
"$BENCH" --addr="$(all_addrs)" --timeout=60s --json --durability=sync --topic=steady \
  --rate="$RATE" --duration=90s --delay=2s --batch=10 --retries=30 --reconnect \
  --lateness-log="$WORK/lateness.txt" >"$WORK/steady.json" 2>"$WORK/steady.err" &
STEADY=$!
sleep 10  # The steady load runs before the move, for comparison.

START="$(now)"
"$CLI" --addr="$(all_addrs)" cluster drain --node="$DRAIN"
WANT="$(python3 -c 'import sys; print(",".join(sorted(set("abcd") - {sys.argv[1]})))' "$DRAIN")"
# One map a tenth of a second: when the primary changed, when d joined the
# replicas, when the drained node left them.
python3 - "$CLI" "$(all_addrs)" "$START" "$DRAIN" "$WANT" <<'PY'
import json, subprocess, sys, time
cli, addrs, start, drained, want = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5]
seen = {}
deadline = time.time() + 600
while time.time() < deadline:
    out = subprocess.run([cli, "--addr=" + addrs, "--json", "cluster"], capture_output=True, text=True)
    try:
        shard = json.loads(out.stdout)["shards"][0]
    except (ValueError, KeyError, IndexError):
        time.sleep(0.1)
        continue
    t = time.time() - start
    if shard.get("primary") != "a":
        seen.setdefault("another node is primary", t)
    if "d" in shard.get("replicas", []):
        seen.setdefault("d added to the replicas", t)
    if ",".join(sorted(shard.get("replicas", []))) == want and ",".join(sorted(shard.get("isr", []))) == want:
        seen.setdefault(drained + " left the replicas", t)
        break
    time.sleep(0.1)
else:
    sys.exit("rebalance.sh: the move did not finish within 600 s")
print("move: " + "; ".join("%s %.2f s after the drain" % (k, v) for k, v in seen.items()))
PY
DONE="$(now)"
grep -o 'rebuilt its copy of shard 0 in .*' "$WORK/d.log" || echo "d followed the log (no checkpoint)"
grep -o 'stopped writing shard 0 at entry .*' "$WORK/a.log" || true

wait "$STEADY" || true
python3 - "$WORK/steady.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
lat = r.get("lateness_ms", {})
print("steady load through the move: %d published, %d delivered, %d undelivered, "
      "%d early, %d duplicates, %d errors; lateness p50 %.1f ms, p99 %.1f ms, max %.1f ms" % (
      r.get("published", 0), r.get("delivered", 0), r.get("undelivered", 0),
      r.get("early", 0), r.get("duplicates", 0), r.get("errors", 0),
      lat.get("p50", 0), lat.get("p99", 0), lat.get("max", 0)))
PY

# Lateness of the messages due during the move against the others.
python3 - "$WORK/lateness.txt" "$START" "$DONE" <<'PY'
import sys
start, done = float(sys.argv[2]) * 1e6, float(sys.argv[3]) * 1e6
inside, outside = [], []
for line in open(sys.argv[1]):
    due, arrived = map(int, line.split()[:2])
    (inside if start <= due <= done else outside).append((arrived - due) / 1000)
def p(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")
for name, xs in (("due during the move", inside), ("due outside it", outside)):
    print("lateness, %s: %d messages, p50 %.1f ms, p99 %.1f ms, max %.1f ms" % (
        name, len(xs), p(xs, 0.5), p(xs, 0.99), max(xs) if xs else float("nan")))
PY

# d's copy holds every pending message: d stops, and its copy of the shard
# is opened by a single hourglassd (the replication keys are ignored there).
kill -TERM "${PIDS[d]}"; wait "${PIDS[d]}" 2>/dev/null || true
unset 'PIDS[d]'
"$HOURGLASSD" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 \
  --data_dir="$WORK/d/shards/0" >"$WORK/d-alone.log" 2>&1 &
PIDS[alone]=$!
ALONE="127.0.0.1:$(port_of "$WORK/d-alone.log")"
"$CLI" --addr="$ALONE" --json stats --topic=pending >"$WORK/stats.json"
python3 - "$WORK/stats.json" "$COUNT" <<'PY'
import json, sys
stats = json.loads(open(sys.argv[1]).read())
topics = stats.get("topics", [stats])
scheduled = sum(int(t.get("scheduled", 0)) for t in topics)
print("d's copy: %d of %s pending messages scheduled" % (scheduled, sys.argv[2]))
sys.exit(0 if scheduled == int(sys.argv[2]) else 1)
PY

#!/usr/bin/env bash
# tests/bench/cluster.sh: cluster mode against a single node, in one run
# (issue 21's benchmarks), all on this machine's loopback:
#   1. publish throughput, batched Publish calls and PublishStream: a single
#      hourglassd, then the primary of a three-node cluster (one etcd, three
#      hourglassd, --replication_factor=3 --min_insync=2), interleaved
#      --rounds times;
#   2. failover: kill -9 of the primary, then the time until a publish is
#      accepted through the cluster (the client given every node), over
#      --failovers kills (the killed node restarts and catches up between
#      them); and the same for a SIGTERM hand-over.
#
#   tests/bench/cluster.sh [--build=build/release] [--rounds=3]
#       [--count=200000] [--failovers=20] [--lease_ttl=3s]
#
# Prints one line per run, the medians, and the failover times' p50, p99
# and max. Needs etcd (deploy/setup.sh installs etcd-server).
set -euo pipefail

BUILD=build/release ROUNDS=3 COUNT=200000 FAILOVERS=20 TTL=3s
for arg in "$@"; do
  case "$arg" in
    --build=*) BUILD="${arg#*=}" ;;
    --rounds=*) ROUNDS="${arg#*=}" ;;
    --count=*) COUNT="${arg#*=}" ;;
    --failovers=*) FAILOVERS="${arg#*=}" ;;
    --lease_ttl=*) TTL="${arg#*=}" ;;
    -h|--help) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "cluster.sh: unknown argument \"$arg\" (see --help)" >&2; exit 2 ;;
  esac
done
HOURGLASSD="$BUILD/cmd/hourglassd/hourglassd"
BENCH="$BUILD/cmd/hourglass-bench/hourglass-bench"
CLI="$BUILD/cmd/hourglass/hourglass"
for f in "$HOURGLASSD" "$BENCH" "$CLI"; do
  [ -x "$f" ] || { echo "cluster.sh: $f is missing (build the release preset)" >&2; exit 2; }
done
command -v etcd >/dev/null || { echo "cluster.sh: etcd is missing (deploy/setup.sh)" >&2; exit 2; }

WORK="$(mktemp -d /tmp/hourglass-cluster-XXXXXX)"
declare -A PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }
port_of() {  # LOG -> the port hourglassd listens on, once it logged it
  for _ in $(seq 1 400); do
    local p
    p="$(grep -o 'listening on [^ ]* (port [0-9]*)' "$1" 2>/dev/null | grep -o '[0-9]*)$' | tr -d ')' || true)"
    if [ -n "$p" ]; then echo "$p"; return; fi
    sleep 0.05
  done
  echo "cluster.sh: no port in $1" >&2; exit 1
}

start_node() {  # NAME [FLAGS...]: starts hourglassd NAME with its data in $WORK/NAME
  local name="$1"; shift
  "$HOURGLASSD" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 \
    --data_dir="$WORK/$name" --durability=sync "$@" >"$WORK/$name.log" 2>&1 &
  PIDS[$name]=$!
}

bench() {  # ADDR NAME HOW -> one line: NAME HOW publish_rate
  "$BENCH" --addr="$1" --timeout=60s --json --durability=sync --consumers=0 \
    --count="$COUNT" --batch=100 --producers=2 --concurrency=16 --publish="$3" \
    >"$WORK/$2-$3.json" 2>"$WORK/$2-$3.err" || true
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], sys.argv[3], round(r["publish_rate"]))' \
    "$WORK/$2-$3.json" "$2" "$3"
}

# --- etcd -----------------------------------------------------------------
ETCD_PORT="$(free_port)" PEER_PORT="$(free_port)"
etcd --name=bench --data-dir="$WORK/etcd" \
  --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls="http://127.0.0.1:$PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$PEER_PORT" \
  --initial-cluster="bench=http://127.0.0.1:$PEER_PORT" >"$WORK/etcd.log" 2>&1 &
PIDS[etcd]=$!

# Each cluster of the run has a name of its own (a prefix of its own in etcd).
CLUSTER=bench0
cluster_flags() { echo --etcd="127.0.0.1:$ETCD_PORT" --lease_ttl="$TTL" --cluster="$CLUSTER"; }
declare -A ADDR=()
start_cluster_node() {  # NAME
  # shellcheck disable=SC2046
  start_node "$1" $(cluster_flags) --node_id="$1"
  ADDR[$1]="127.0.0.1:$(port_of "$WORK/$1.log")"
}
all_addrs() { local IFS=,; echo "${ADDR[*]}"; }
# Waits until a publish through any node is accepted; prints the seconds.
await_publish() {  # ID
  local start; start="$(now)"
  for _ in $(seq 1 2000); do
    if "$CLI" --addr="$(all_addrs)" --timeout=1s publish --topic=probe --id="$1" --data=x >/dev/null 2>&1; then
      python3 -c "print(round($(now) - $start, 3))"; return
    fi
    sleep 0.02
  done
  echo "cluster.sh: no publish accepted within 40 s" >&2; exit 1
}
primary() {  # the node id of the primary, from the map
  "$CLI" --addr="$(all_addrs)" --json cluster | python3 -c 'import json,sys; m=json.load(sys.stdin); print(m["shards"][0]["primary"])'
}
await_in_sync() {  # N: until the in-sync set has N members
  for _ in $(seq 1 1000); do
    local n
    n="$("$CLI" --addr="$(all_addrs)" --json cluster 2>/dev/null | python3 -c 'import json,sys; m=json.load(sys.stdin); print(len(m["shards"][0]["isr"]))' 2>/dev/null || echo 0)"
    [ "$n" = "$1" ] && return
    sleep 0.05
  done
  echo "cluster.sh: the in-sync set never reached $1" >&2; exit 1
}

# --- 1. throughput ----------------------------------------------------------
echo "# publish throughput, msg/s (--count=$COUNT, batches of 100, 16 in flight, sync)"
for round in $(seq 1 "$ROUNDS"); do
  rm -rf "$WORK/single"
  start_node single
  SINGLE="127.0.0.1:$(port_of "$WORK/single.log")"
  bench "$SINGLE" single calls
  bench "$SINGLE" single stream
  kill "${PIDS[single]}"; wait "${PIDS[single]}" 2>/dev/null || true; unset 'PIDS[single]'

  for n in a b c; do rm -rf "$WORK/$n"; done
  CLUSTER="bench$round"
  for n in a b c; do start_cluster_node "$n"; done
  await_publish "warm-$round" >/dev/null
  await_in_sync 3
  P="$(primary)"
  bench "${ADDR[$P]}" cluster calls
  bench "${ADDR[$P]}" cluster stream
  for n in a b c; do kill "${PIDS[$n]}"; done
  for n in a b c; do wait "${PIDS[$n]}" 2>/dev/null || true; unset "PIDS[$n]"; done
done | tee "$WORK/throughput.txt"
python3 - "$WORK/throughput.txt" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    if line.startswith("#"): continue
    who, how, rate = line.split()
    runs.setdefault((who, how), []).append(float(rate))
for how in ("calls", "stream"):
    s = statistics.median(runs[("single", how)])
    c = statistics.median(runs[("cluster", how)])
    print(f"median {how}: single node {s:.0f} msg/s, cluster {c:.0f} msg/s ({100*c/s:.0f} %)")
PY

# --- 2. failover ------------------------------------------------------------
echo "# failover: kill -9 of the primary, seconds to the first publish accepted (--lease_ttl=$TTL)"
for n in a b c; do rm -rf "$WORK/$n"; done
CLUSTER=failover
for n in a b c; do start_cluster_node "$n"; done
await_publish warm >/dev/null
: >"$WORK/kill.txt"
for i in $(seq 1 "$FAILOVERS"); do
  await_in_sync 3
  P="$(primary)"
  kill -9 "${PIDS[$P]}"; wait "${PIDS[$P]}" 2>/dev/null || true
  await_publish "after-kill-$i" | tee -a "$WORK/kill.txt"
  start_cluster_node "$P"
done
echo "# hand-over: SIGTERM of the primary, seconds to the first publish accepted"
: >"$WORK/term.txt"
for i in $(seq 1 "$FAILOVERS"); do
  await_in_sync 3
  P="$(primary)"
  kill -TERM "${PIDS[$P]}"; wait "${PIDS[$P]}" 2>/dev/null || true
  await_publish "after-term-$i" | tee -a "$WORK/term.txt"
  start_cluster_node "$P"
done
python3 - "$WORK/kill.txt" "$WORK/term.txt" <<'PY'
import sys
for name, path in (("kill -9", sys.argv[1]), ("SIGTERM", sys.argv[2])):
    xs = sorted(float(x) for x in open(path) if x.strip())
    p = lambda q: xs[min(len(xs) - 1, int(q * len(xs)))]
    print(f"{name}: {len(xs)} failovers, p50 {p(0.5):.2f} s, p99 {p(0.99):.2f} s, max {xs[-1]:.2f} s")
PY

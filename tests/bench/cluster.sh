#!/usr/bin/env bash
# tests/bench/cluster.sh: cluster mode against a single node, in one run
# (issue 21's benchmarks), all on this machine's loopback:
#   1. publish throughput, batched Publish calls and PublishStream: a single
#      hourglassd, then the primary of a three-node cluster (one etcd, three
#      hourglassd, --replication_factor=3 --min_insync=2), interleaved
#      --rounds times, at each --concurrency (publish calls in flight over
#      both producers; a list such as 16,64,256 measures each, and the
#      summary adds each side's best median: its capacity); before the
#      rounds, --warmup rounds at the highest concurrency whose lines start
#      with "#" and count in no median (see "Warm-up" below);
#   2. failover: kill -9 of the primary, then the time until a publish is
#      accepted through the cluster (the client given every node), over
#      --failovers kills (the killed node restarts and catches up between
#      them); and the same for a SIGTERM hand-over;
#   3. steady load through a failover: --steady_rate msg/s (delay 2 s) for
#      --steady seconds through the cluster, once without a fault and once
#      with a kill -9 of the primary a third of the way in; lateness (arrival
#      minus deliver_at) of the messages due outside the failover window
#      against the run without a fault, and the window's length: from the
#      kill until the new primary accepts a publish (messages due in it wait
#      for the new primary), and when the last of them arrived.
#
#   tests/bench/cluster.sh [--build=build/release] [--rounds=3] [--warmup=1]
#       [--count=200000] [--concurrency=16] [--failovers=20] [--lease_ttl=3s]
#       [--steady=45] [--steady_rate=10000] [--baseline=BUILD_DIR]
#
# --rounds=0, --failovers=0 or --steady=0 skips that part. Prints one line
# per run, the medians, the failover times' p50, p99 and max, and the steady
# runs' lateness. --baseline adds to part 1 a three-node cluster of another
# build's hourglassd (a tree holding cmd/hourglassd/hourglassd, say of the
# commit before a change), measured in each round beside this build's with
# the same load generator, and prints this build's change against it. Needs
# etcd (deploy/setup.sh installs etcd-server).
set -euo pipefail

BUILD=build/release ROUNDS=3 WARMUP=1 COUNT=200000 CONCURRENCY=16 FAILOVERS=20 TTL=3s STEADY=45 STEADY_RATE=10000 BASELINE=
for arg in "$@"; do
  case "$arg" in
    --build=*) BUILD="${arg#*=}" ;;
    --rounds=*) ROUNDS="${arg#*=}" ;;
    --warmup=*) WARMUP="${arg#*=}" ;;
    --count=*) COUNT="${arg#*=}" ;;
    --concurrency=*) CONCURRENCY="${arg#*=}" ;;
    --failovers=*) FAILOVERS="${arg#*=}" ;;
    --lease_ttl=*) TTL="${arg#*=}" ;;
    --steady=*) STEADY="${arg#*=}" ;;
    --steady_rate=*) STEADY_RATE="${arg#*=}" ;;
    --baseline=*) BASELINE="${arg#*=}" ;;
    -h|--help) sed -n '2,34p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "cluster.sh: unknown argument \"$arg\" (see --help)" >&2; exit 2 ;;
  esac
done
# shellcheck source=tests/bench/cluster_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh"
if [ -n "$BASELINE" ] && [ ! -x "$BASELINE/cmd/hourglassd/hourglassd" ]; then
  echo "cluster.sh: $BASELINE/cmd/hourglassd/hourglassd is missing (--baseline)" >&2; exit 2
fi

start_node() {  # NAME [FLAGS...]: starts hourglassd NAME with its data in $WORK/NAME
  local name="$1"; shift
  "$HOURGLASSD" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 \
    --data_dir="$WORK/$name" --durability=sync "$@" >"$WORK/$name.log" 2>&1 &
  PIDS[$name]=$!
}

bench() {  # ADDR NAME HOW CONCURRENCY -> one line: NAME HOW CONCURRENCY publish_rate
  "$BENCH" --addr="$1" --timeout=60s --json --durability=sync --consumers=0 \
    --count="$COUNT" --batch=100 --producers=2 --concurrency="$4" --publish="$3" \
    >"$WORK/$2-$3.json" 2>"$WORK/$2-$3.err" || true
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], sys.argv[3], sys.argv[4], round(r["publish_rate"]))' \
    "$WORK/$2-$3.json" "$2" "$3" "$4"
}

start_etcd

# Each cluster of the run has a name of its own (a prefix of its own in etcd).
CLUSTER=bench0
# One shard: the benchmark compares its primary with a single node.
# A --baseline built before nodes authenticated one another (--peer_token_file)
# gets no peer flag.
peer_flag() {
  local help; help="$("$HOURGLASSD" --helpfull 2>/dev/null || true)"
  if [[ "$help" == *-peer_token_file* ]]; then echo "$PEER_FLAG"; fi
}
cluster_flags() { echo --etcd="127.0.0.1:$ETCD_PORT" --lease_ttl="$TTL" --cluster="$CLUSTER" --shards=1 $(peer_flag); }
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
measure_cluster() {  # NAME ROUND CONCURRENCY: a fresh three-node cluster of $HOURGLASSD
  for n in a b c; do rm -rf "${WORK:?}/$n"; done
  CLUSTER="$1$2-$3"
  for n in a b c; do start_cluster_node "$n"; done
  await_publish "warm-$2" >/dev/null
  await_in_sync 3
  P="$(primary)"
  bench "${ADDR[$P]}" "$1" calls "$3"
  bench "${ADDR[$P]}" "$1" stream "$3"
  for n in a b c; do kill "${PIDS[$n]}"; done
  for n in a b c; do wait "${PIDS[$n]}" 2>/dev/null || true; unset "PIDS[$n]"; done
}
if [ "$ROUNDS" -gt 0 ]; then
echo "# publish throughput, msg/s (--count=$COUNT, batches of 100, --concurrency=$CONCURRENCY calls in flight, sync)"
IFS=, read -r -a CONCURRENCIES <<<"$CONCURRENCY"
# Warm-up: on a VM that returns freed memory to its host (free page
# reporting), the first writes into memory the host took back fault on the
# host, and the page cache's copies of the logs cost several times what they
# cost once the memory is in use again. A cluster writes three logs, so a
# cold machine takes more from it than from a single node: in one profile,
# after three idle hours, copying into page-cache pages took 8.3 % of the
# machine, against 1.3 % a few runs later (BENCHMARKS.md, 2026-12-03).
for round in $(seq 1 "$WARMUP"); do
  conc="${CONCURRENCIES[-1]}"
  rm -rf "$WORK/single"
  start_node single
  SINGLE="127.0.0.1:$(port_of "$WORK/single.log")"
  bench "$SINGLE" single calls "$conc" | sed 's/^/# warm-up: /'
  kill "${PIDS[single]}"; wait "${PIDS[single]}" 2>/dev/null || true; unset 'PIDS[single]'
  measure_cluster cluster "warmup$round" "$conc" | sed 's/^/# warm-up: /'
done
for round in $(seq 1 "$ROUNDS"); do
  for conc in "${CONCURRENCIES[@]}"; do
    rm -rf "$WORK/single"
    start_node single
    SINGLE="127.0.0.1:$(port_of "$WORK/single.log")"
    bench "$SINGLE" single calls "$conc"
    bench "$SINGLE" single stream "$conc"
    kill "${PIDS[single]}"; wait "${PIDS[single]}" 2>/dev/null || true; unset 'PIDS[single]'

    measure_cluster cluster "$round" "$conc"
    if [ -n "$BASELINE" ]; then
      HOURGLASSD="$BASELINE/cmd/hourglassd/hourglassd" measure_cluster baseline "$round" "$conc"
    fi
  done
done | tee "$WORK/throughput.txt"
python3 - "$WORK/throughput.txt" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    if line.startswith("#"): continue
    who, how, conc, rate = line.split()
    runs.setdefault((who, how, int(conc)), []).append(float(rate))
concs = sorted({k[2] for k in runs})
for how in ("calls", "stream"):
    best = {"single": 0.0, "cluster": 0.0}
    for conc in concs:
        s = statistics.median(runs[("single", how, conc)])
        c = statistics.median(runs[("cluster", how, conc)])
        best["single"], best["cluster"] = max(best["single"], s), max(best["cluster"], c)
        print(f"median {how} at {conc} in flight: single node {s:.0f} msg/s, cluster {c:.0f} msg/s ({100*c/s:.0f} %)")
    if len(concs) > 1:
        print(f"capacity {how} (best median): single node {best['single']:.0f} msg/s, "
              f"cluster {best['cluster']:.0f} msg/s ({100*best['cluster']/best['single']:.0f} %)")
    for conc in concs:
        if ("baseline", how, conc) not in runs: continue
        b = statistics.median(runs[("baseline", how, conc)])
        c = statistics.median(runs[("cluster", how, conc)])
        print(f"median {how} at {conc} in flight: baseline's cluster {b:.0f} msg/s, "
              f"this build's {c:.0f} msg/s ({100*(c/b-1):+.1f} %)")
PY
fi

# --- 2. failover ------------------------------------------------------------
if [ "$FAILOVERS" -gt 0 ]; then
echo "# failover: kill -9 of the primary, seconds to the first publish accepted (--lease_ttl=$TTL)"
for n in a b c; do rm -rf "${WORK:?}/$n"; done
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
fi

# --- 3. steady load through a failover ----------------------------------------
if [ "$STEADY" -gt 0 ]; then
echo "# steady $STEADY_RATE msg/s for $STEADY s (delay 2 s), without a fault, then with a kill -9 of the primary"
for n in a b c; do
  if [ -n "${PIDS[$n]:-}" ]; then kill -9 "${PIDS[$n]}"; wait "${PIDS[$n]}" 2>/dev/null || true; unset "PIDS[$n]"; fi
  rm -rf "${WORK:?}/$n"
done
CLUSTER=steady
for n in a b c; do start_cluster_node "$n"; done
await_publish warm-steady >/dev/null
steady() {  # NAME: one run in the background; its pid in STEADY_PID
  "$BENCH" --addr="$(all_addrs)" --timeout=60s --json --durability=sync \
    --rate="$STEADY_RATE" --duration="${STEADY}s" --delay=2s --batch=100 \
    --producers=2 --concurrency=16 --consumers=1 --retries=100 --reconnect \
    --drain-timeout=60s --lateness-log="$WORK/$1.lateness" \
    >"$WORK/$1.json" 2>"$WORK/$1.err" &
  STEADY_PID=$!
}
await_in_sync 3
steady calm
wait "$STEADY_PID" || echo "cluster.sh: the run without a fault failed: $(tail -1 "$WORK/calm.err")" >&2
await_in_sync 3
P="$(primary)"
steady failover
sleep "$(python3 -c "print($STEADY / 3)")"
KILLED_AT="$(now)"
kill -9 "${PIDS[$P]}"; wait "${PIDS[$P]}" 2>/dev/null || true
ACCEPTED_AFTER="$(await_publish after-steady-kill)"
start_cluster_node "$P"
wait "$STEADY_PID" || echo "cluster.sh: the run through a failover failed: $(tail -1 "$WORK/failover.err")" >&2
python3 - "$WORK" "$KILLED_AT" "$ACCEPTED_AFTER" <<'PY'
import json, sys
work, killed, accepted = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
def load(name):
    rows = []
    for line in open(f"{work}/{name}.lateness"):
        due, arrival = (int(x) / 1e6 for x in line.split())
        rows.append((due, arrival, arrival - due))
    return rows, json.load(open(f"{work}/{name}.json"))
def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")
def line(label, xs):
    if not xs:
        return f"{label}: no msgs"
    return (f"{label}: {len(xs)} msgs, lateness p50 {pct(xs, .5)*1e3:.1f} ms, "
            f"p99 {pct(xs, .99)*1e3:.1f} ms, max {max(xs)*1e3:.1f} ms")
calm, calm_report = load("calm")
fail, fail_report = load("failover")
# The window: due between what was in flight at the kill (a quarter second
# before it) and the new primary accepting publishes; those messages wait for
# it. Everything due later is the new primary's to deliver on time.
end = killed + accepted
inside = [(a, l) for d, a, l in fail if killed - 0.25 <= d <= end]
before = [l for d, a, l in fail if d < killed - 0.25]
after = [l for d, a, l in fail if d > end]
# Producers held back by the failover send what they owe at once when it
# ends, due the delay (2 s) later: a burst that comes due within about
# 3 s of the window's end. Past that, the load is steady again.
catch_up = [l for d, a, l in fail if end < d <= end + 3]
steady_after = [l for d, a, l in fail if d > end + 3]
print(line("without a fault", [r[2] for r in calm]))
print(line("with a failover, due outside the window", before + after))
print(line("  of which due before it", before))
print(line("  of which due after it", after))
print(line("    due up to 3 s after it (the producers' catch-up)", catch_up))
print(line("    due later", steady_after))
print(line("with a failover, due inside the window", [l for a, l in inside]))
print(f"window: kill -9 -> first publish accepted {accepted:.2f} s; "
      f"what came due in it delivered {max(a for a, l in inside) - killed:.2f} s after the kill")
for name, r in (("without a fault", calm_report), ("with a failover", fail_report)):
    print(f"{name}: published {r.get('published', 0)}, delivered {r.get('delivered', 0)}, "
          f"undelivered {r.get('undelivered', 0)}, duplicates {r.get('duplicates', 0)}, "
          f"early {r.get('early', 0)}, errors {r.get('errors', 0)}")
PY
fi

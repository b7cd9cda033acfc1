#!/usr/bin/env bash
# Hourglass and BullMQ driven from Node, each by its own client library, in
# one run: the Node client of Hourglass (clients/node, hourglass-broker) by
# tests/bench/node/bench.js, BullMQ on Redis by tests/bench/bullmq/bench.js
# (the producer and worker tests/bench/compare.sh runs). Two workloads:
#
#   a. Durable publish throughput of single messages, 64 in flight:
#      hourglassd --durability=sync (each publish answered after fsync),
#      messages on the client's PublishStream, against Queue.add with Redis
#      appendfsync always (answered after fsync). The same BullMQ workload
#      on appendfsync everysec (not durable per call) is shown too.
#   b. Hot second: --hot messages due at one instant, published beforehand
#      in batches of 1000 (publishBatch; Queue.addBulk), then consumed by one
#      consumer process (a subscription acking each; a Worker of
#      concurrency 100, Redis everysec): when the last was delivered, after
#      the instant.
#
#   tests/bench/node_clients.sh [--build-dir=DIR] [--publish=N] [--hot=N]
#                               [--only=a,b] [--out=DIR]
#
# --build-dir holds cmd/hourglassd/hourglassd (default build/release; the
# table says which). --publish (default 200000) and --hot (default 1000000)
# size the workloads. Installs what is missing (redis-server, BullMQ as
# tests/bench/bullmq/package-lock.json pins it, the Node client's
# dependencies as clients/node/package-lock.json pins them), compiles the
# client (tsc), prints a Markdown table, and keeps the raw JSON and logs in
# --out (default: a new directory under /tmp). Leaves nothing running.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BULLMQ_DIR="$ROOT/tests/bench/bullmq"
NODE_BENCH="$ROOT/tests/bench/node/bench.js"
CLIENT_DIR="$ROOT/clients/node"
BUILD_DIR="$ROOT/build/release"
PUBLISH=200000
HOT=1000000
ONLY=a,b
OUT=""
for arg in "$@"; do
  case "$arg" in
    --build-dir=*) BUILD_DIR="${arg#*=}" ;;
    --publish=*) PUBLISH="${arg#*=}" ;;
    --hot=*) HOT="${arg#*=}" ;;
    --only=*) ONLY="${arg#*=}" ;;
    --out=*) OUT="${arg#*=}" ;;
    -h|--help) sed -n '2,28p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "node_clients.sh: unknown argument \"$arg\" (see --help)" >&2; exit 2 ;;
  esac
done
log() { echo "node_clients.sh: $*" >&2; }

HOURGLASSD="$BUILD_DIR/cmd/hourglassd/hourglassd"
[ -x "$HOURGLASSD" ] || { log "no $HOURGLASSD (build it, or give --build-dir)"; exit 1; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
fi
if [ ! -d "$BULLMQ_DIR/node_modules/bullmq" ]; then
  log "installing BullMQ as tests/bench/bullmq/package-lock.json pins it"
  (cd "$BULLMQ_DIR" && { npm ci --no-audit --no-fund --loglevel=silent ||
    npm install --no-save --no-audit --no-fund --loglevel=error; }) >&2
fi
if [ ! -d "$CLIENT_DIR/node_modules/@grpc/grpc-js" ]; then
  log "installing the Node client's dependencies as clients/node/package-lock.json pins them"
  (cd "$CLIENT_DIR" && npm ci --no-audit --no-fund --loglevel=error) >&2
fi
(cd "$CLIENT_DIR" && npx --no-install tsc -p tsconfig.json) >&2

[ -n "$OUT" ] || OUT="$(mktemp -d /tmp/hourglass-node-bench-XXXXXX)"
mkdir -p "$OUT"
WORK="$(mktemp -d /tmp/hourglass-node-bench-data-XXXXXX)"
log "results and logs in $OUT"

# shellcheck source=servers_lib.sh
. "$(dirname "$0")/servers_lib.sh"
cleanup() { stop_server; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

hg() {  # FILE ARGS...
  local file="$OUT/$1.json"; shift
  log "node tests/bench/node/bench.js $*"
  node "$NODE_BENCH" "$@" --addr="127.0.0.1:$PORT" >"$file" 2>"${file%.json}.err" ||
    log "node/bench.js failed: $(tail -n 1 "${file%.json}.err")"
}
bull() {  # FILE ARGS...
  local file="$OUT/$1.json"; shift
  log "node tests/bench/bullmq/bench.js $*"
  (cd "$BULLMQ_DIR" && node bench.js "$@" --port="$PORT") >"$file" 2>"${file%.json}.err" ||
    log "bullmq/bench.js failed: $(tail -n 1 "${file%.json}.err")"
}
get() {  # FILE EXPRESSION (of r)
  node -e "
    let r = {}; try { r = JSON.parse(require('fs').readFileSync('$OUT/$1.json', 'utf8')); } catch (e) {}
    let v; try { v = $2; } catch (e) {}
    console.log(v === undefined || v === null ? '' : v);"
}
fmt() {
  [ -n "$1" ] || { echo "-"; return; }
  node -e "const v = Number('$1'); console.log(Math.abs(v) >= 100 ? Math.round(v).toLocaleString('en-US') : String(Math.round(v * 100) / 100));"
}
declare -a ROWS=()
row() {  # LABEL HOURGLASS BULLMQ higher|lower
  local ratio="n/a"
  if [ -n "$2" ] && [ -n "$3" ]; then
    ratio="$(node -e "const h = Number('$2'), b = Number('$3'); const r = '$4' === 'higher' ? h / b : b / h;
      console.log(isFinite(r) && r > 0 ? r.toFixed(r < 10 ? 2 : 1) + '×' : 'n/a');")"
  fi
  ROWS+=("| $1 | $(fmt "$2") | $(fmt "$3") | $ratio |")
}
wanted() { [[ ",$ONLY," == *",$1,"* ]]; }
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
START=$(date +%s)

if wanted a; then
  start_hourglassd a
  hg a-hg publish --topic=a --count="$PUBLISH" --batch=1 --concurrency=64
  for fsync in always everysec; do
    start_redis "a-$fsync" "$fsync"
    bull "a-bull-$fsync" publish --queue=a --count="$PUBLISH" --batch=1 --concurrency=64 --delay-ms=3600000
  done
  stop_server
  ROWS+=("| **a. durable publish of single messages, 64 in flight, msg/s** ($PUBLISH msgs) | | | |")
  row "hourglass publish (PublishStream, sync) vs Queue.add (appendfsync always)" \
    "$(get a-hg r.rate)" "$(get a-bull-always r.rate)" higher
  row "*the same hourglass run vs Queue.add on appendfsync everysec (not durable per call)*" \
    "$(get a-hg r.rate)" "$(get a-bull-everysec r.rate)" higher
  ROWS+=("| errors | $(get a-hg r.errors) | $(get a-bull-always r.errors) / $(get a-bull-everysec r.errors) | |")
fi

if wanted b; then
  # The instant comes after the last publish: time for publishing at a
  # pessimistic rate, plus 10 s.
  HG_HOT_S=$(( HOT / 20000 + 10 ))
  BULL_HOT_S=$(( HOT / 5000 + 10 ))
  start_hourglassd b
  node "$NODE_BENCH" worker --topic=b --count="$HOT" --timeout-ms=$(( (HG_HOT_S + 60) * 1000 )) \
    --addr="127.0.0.1:$PORT" >"$OUT/b-hg-worker.json" 2>"$OUT/b-hg-worker.err" &
  WORKER=$!
  hg b-hg-producer publish --topic=b --count="$HOT" --batch=1000 --concurrency=8 --hot-ms=$(( HG_HOT_S * 1000 ))
  wait "$WORKER" || log "node/bench.js worker failed: $(tail -n 1 "$OUT/b-hg-worker.err")"
  start_redis b everysec
  (cd "$BULLMQ_DIR" && exec node bench.js worker --queue=b --count="$HOT" --concurrency=100 \
      --timeout-ms=$(( (BULL_HOT_S + 60) * 1000 )) --port="$PORT") \
    >"$OUT/b-bull-worker.json" 2>"$OUT/b-bull-worker.err" &
  WORKER=$!
  bull b-bull-producer publish --queue=b --count="$HOT" --batch=1000 --concurrency=8 --hot-ms=$(( BULL_HOT_S * 1000 ))
  wait "$WORKER" || log "bullmq/bench.js worker failed: $(tail -n 1 "$OUT/b-bull-worker.err")"
  stop_server
  ROWS+=("| **b. hot second: $HOT messages due at one instant** | | | |")
  row "all delivered, seconds after the instant" \
    "$(node -e "console.log(Number('$(get b-hg-worker r.lateness_ms.max)') / 1000)")" \
    "$(node -e "console.log(Number('$(get b-bull-worker r.lateness_ms.max)') / 1000)")" lower
  row "delivery rate, msg/s" "$(get b-hg-worker r.rate)" "$(get b-bull-worker r.rate)" higher
  row "lateness p50, ms" "$(get b-hg-worker r.lateness_ms.p50)" "$(get b-bull-worker r.lateness_ms.p50)" lower
  row "publishing (batches of 1000, 8 in flight), msg/s" "$(get b-hg-producer r.rate)" "$(get b-bull-producer r.rate)" higher
  ROWS+=("| early deliveries | $(get b-hg-worker r.early) | $(get b-bull-worker r.early) | |")
  ROWS+=("| delivered | $(get b-hg-worker r.delivered) of $(get b-hg-producer r.published) | $(get b-bull-worker r.delivered) of $(get b-bull-producer r.published) | |")
  ROWS+=("| publishing ended after the instant, ms (0: before) | $(get b-hg-producer r.hot_late_ms) | $(get b-bull-producer r.hot_late_ms) | |")
fi

echo
echo "| workload | hourglass (Node client) | BullMQ | hourglass advantage |"
echo "| --- | ---: | ---: | ---: |"
printf '%s\n' "${ROWS[@]}"
echo
echo "hourglassd: $HOURGLASSD ($("$HOURGLASSD" --version 2>/dev/null | head -n 1)); hourglass-broker $(node -p "require('$CLIENT_DIR/package.json').version") on @grpc/grpc-js $(node -p "require('$CLIENT_DIR/node_modules/@grpc/grpc-js/package.json').version"); BullMQ $(node -p "require('$BULLMQ_DIR/node_modules/bullmq/package.json').version"), $(redis-server --version | cut -d' ' -f1-3), Node $(node --version)."
echo "$(nproc) cores; load average before: $LOAD_BEFORE; took $(( $(date +%s) - START )) s; $(date -u '+%Y-%m-%d %H:%M UTC')."

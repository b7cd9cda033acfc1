#!/usr/bin/env bash
# tests/bench/compare.sh: Hourglass against BullMQ on Redis, on this machine,
# with the same workloads, printed as one table (Markdown) with both columns
# and the ratio.
#
#   tests/bench/compare.sh [--quick] [--hot=N] [--pending=N] [--steady=DURATION]
#                          [--publish=N] [--only=a,b,c,d] [--no-build]
#                          [--build-dir=DIR] [--out=DIR]
#
# Workloads (100-byte payloads everywhere):
#   a. durable publish throughput: batches of 100 with 8 and with 32 calls in
#      flight, and unbatched with 64 in flight: as Publish calls, and as
#      requests on PublishStream (BullMQ's 64 adds in flight are likewise
#      pipelined on one connection). hourglassd --durability=sync (answers
#      after fsync) is compared with Redis appendfsync always (answers after
#      fsync); the same BullMQ runs on appendfsync everysec are shown too.
#   b. steady 10,000 msg/s for --steady (default 60 s), delays uniform in
#      [1 s, 10 s], 10 messages per call (Queue.addBulk for BullMQ): lateness
#      percentiles, early count.
#   c. hot second: --hot messages (default 1,000,000) all due at one instant:
#      time from the instant until the last one is delivered; consumers on
#      SubscribeBatches (the bench's default), and again on Subscribe.
# Consumers of b and c take deliveries with SubscribeBatches unless said.
#   d. --pending messages (default 10,000,000) scheduled a day ahead: resident
#      memory of the server process and bytes on disk.
# b, c and d run Redis with appendfsync everysec (BullMQ's usual set-up) and
# hourglassd with --durability=sync. Each workload gets a fresh server and
# data directory. --quick shrinks them to a few minutes in all: --hot=100000
# --pending=1000000 --steady=15s --publish=200000.
#
# Installs what is missing (Debian 12: redis-server, nodejs, npm; BullMQ as
# tests/bench/bullmq/package-lock.json pins it), builds the release preset
# (cmake --workflow --preset release) unless --no-build (then the binaries
# come from --build-dir, default build/release), and leaves nothing
# running. Servers listen on 127.0.0.1 only, on ports the OS picks. Raw
# results (JSON, logs) stay in --out (default: a new directory under /tmp).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BULLMQ_DIR="$ROOT/tests/bench/bullmq"

HOT=1000000
PENDING=10000000
STEADY=60s
PUBLISH=1000000
ONLY=a,b,c,d
BUILD=1
BUILD_DIR=""
OUT=""
ARGS="$*"

usage() {
  sed -n '2,36p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

for arg in "$@"; do
  case "$arg" in
    --quick) HOT=100000 PENDING=1000000 STEADY=15s PUBLISH=200000 ;;
    --hot=*) HOT="${arg#*=}" ;;
    --pending=*) PENDING="${arg#*=}" ;;
    --steady=*) STEADY="${arg#*=}" ;;
    --publish=*) PUBLISH="${arg#*=}" ;;
    --only=*) ONLY="${arg#*=}" ;;
    --no-build) BUILD=0 ;;
    --build-dir=*) BUILD_DIR="${arg#*=}" ;;
    --out=*) OUT="${arg#*=}" ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare.sh: unknown argument \"$arg\" (see --help)" >&2; exit 2 ;;
  esac
done

log() { echo "compare.sh: $*" >&2; }

# --- What is missing gets installed. ---------------------------------------
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-cli >/dev/null || missing+=(redis-tools)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
fi
if [ ! -d "$BULLMQ_DIR/node_modules/bullmq" ]; then
  log "installing BullMQ as tests/bench/bullmq/package-lock.json pins it"
  # npm ci refuses a lock file without entries for other platforms' optional
  # packages (which some registries lack); npm install --no-save installs
  # the locked versions all the same and leaves the lock file alone.
  (cd "$BULLMQ_DIR" && { npm ci --no-audit --no-fund --loglevel=silent ||
    npm install --no-save --no-audit --no-fund --loglevel=error; }) >&2
fi

if [ "$BUILD" = 1 ]; then
  log "building the release preset"
  (cd "$ROOT" && cmake --workflow --preset release) >&2
fi
[ -n "$BUILD_DIR" ] || BUILD_DIR="$ROOT/build/release"
HOURGLASSD="$BUILD_DIR/cmd/hourglassd/hourglassd"
HOURGLASS_BENCH="$BUILD_DIR/cmd/hourglass-bench/hourglass-bench"
for binary in "$HOURGLASSD" "$HOURGLASS_BENCH"; do
  [ -x "$binary" ] || { log "no $binary (drop --no-build)"; exit 1; }
done

[ -n "$OUT" ] || OUT="$(mktemp -d /tmp/hourglass-compare-XXXXXX)"
mkdir -p "$OUT"
WORK="$(mktemp -d /tmp/hourglass-compare-data-XXXXXX)"
log "results and logs in $OUT"

# --- Servers, one at a time, each on a fresh directory. --------------------
# shellcheck source=servers_lib.sh
. "$(dirname "$0")/servers_lib.sh"
cleanup() {
  stop_server
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# hourglass-bench --json against the running hourglassd; the JSON to FILE.
hg_bench() {  # FILE ARGS...
  local file="$OUT/$1.json"
  shift
  log "hourglass-bench $*"
  "$HOURGLASS_BENCH" --addr="127.0.0.1:$PORT" --timeout=60s --json \
    --durability=sync "$@" >"$file" 2>"${file%.json}.err" || {
    log "hourglass-bench failed: $(tail -n 1 "${file%.json}.err")"
  }
}

bull() {  # FILE ARGS... (node bench.js)
  local file="$OUT/$1.json"
  shift
  log "node bench.js $*"
  (cd "$BULLMQ_DIR" && node bench.js "$@" --port="$PORT") >"$file" 2>"${file%.json}.err" || {
    log "bench.js failed: $(tail -n 1 "${file%.json}.err")"
  }
}

# A field of a JSON result ("" when missing): get NAME EXPRESSION, where the
# expression reads the object as r, e.g. 'r.lateness_ms.p99'.
get() {
  node -e "
    const fs = require('fs');
    let r = {};
    try { r = JSON.parse(fs.readFileSync('$OUT/$1.json', 'utf8')); } catch (e) {}
    let v; try { v = $2; } catch (e) {}
    console.log(v === undefined || v === null ? '' : v);"
}

rss_kib() { ps -o rss= -p "$SERVER_PID" | tr -d ' '; }
disk_bytes() { du -sb "$SERVER_DIR" | cut -f1; }

seconds_of() {  # 60s, 2m, 90 -> seconds
  case "$1" in
    *ms) echo $(( ${1%ms} / 1000 )) ;;
    *s) echo "${1%s}" ;;
    *m) echo $(( ${1%m} * 60 )) ;;
    *) echo "$1" ;;
  esac
}

declare -a ROWS=()
# row LABEL HOURGLASS BULLMQ BETTER(higher|lower) [UNIT]
row() {
  local label="$1" hg="$2" bq="$3" better="$4" ratio="n/a"
  if [ -n "$hg" ] && [ -n "$bq" ]; then
    ratio="$(node -e "
      const h = Number('$hg'), b = Number('$bq');
      const r = '$better' === 'higher' ? h / b : b / h;
      console.log(isFinite(r) && r > 0 ? r.toFixed(r < 10 ? 2 : 1) + '×' : 'n/a');")"
  fi
  ROWS+=("| $label | $(fmt "$hg") | $(fmt "$bq") | $ratio |")
}
fmt() {  # 1234567.8 -> 1,234,568; 3.456 -> 3.46; "" -> -
  [ -n "$1" ] || { echo "-"; return; }
  node -e "
    const v = Number('$1');
    console.log(Math.abs(v) >= 100 ? Math.round(v).toLocaleString('en-US')
                                   : String(Math.round(v * 100) / 100));"
}
note() { ROWS+=("| $1 | | | |"); }

wanted() { [[ ",$ONLY," == *",$1,"* ]]; }

LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"

# --- a. Durable publish throughput. ----------------------------------------
if wanted a; then
  UNBATCHED=$(( PUBLISH / 5 ))
  start_hourglassd a-batched
  hg_bench a-hg-batched --consumers=0 --count="$PUBLISH" --batch=100 \
    --producers=2 --concurrency=8 --delay=1h
  start_hourglassd a-batched32
  hg_bench a-hg-batched32 --consumers=0 --count="$PUBLISH" --batch=100 \
    --producers=2 --concurrency=32 --delay=1h
  start_hourglassd a-unbatched
  hg_bench a-hg-unbatched --consumers=0 --count="$UNBATCHED" --batch=1 \
    --producers=2 --concurrency=64 --delay=1h
  start_hourglassd a-unbatched-stream
  hg_bench a-hg-unbatched-stream --consumers=0 --count="$UNBATCHED" --batch=1 \
    --producers=2 --concurrency=64 --delay=1h --publish=stream
  for fsync in always everysec; do
    start_redis "a-$fsync-batched" "$fsync"
    bull "a-bull-$fsync-batched" publish --queue=a --count="$PUBLISH" \
      --batch=100 --concurrency=8 --delay-ms=3600000
    start_redis "a-$fsync-unbatched" "$fsync"
    bull "a-bull-$fsync-unbatched" publish --queue=a --count="$UNBATCHED" \
      --batch=1 --concurrency=64 --delay-ms=3600000
  done
  start_redis a-always-batched32 always
  bull a-bull-always-batched32 publish --queue=a --count="$PUBLISH" \
    --batch=100 --concurrency=32 --delay-ms=3600000
  stop_server
  note "**a. durable publish throughput, msg/s** (hourglassd sync vs Redis appendfsync always)"
  row "batches of 100, 8 calls in flight ($PUBLISH msgs)" \
    "$(get a-hg-batched r.publish_rate)" "$(get a-bull-always-batched r.rate)" higher
  row "batches of 100, 32 calls in flight ($PUBLISH msgs)" \
    "$(get a-hg-batched32 r.publish_rate)" \
    "$(get a-bull-always-batched32 r.rate)" higher
  row "unbatched, 64 calls in flight ($UNBATCHED msgs)" \
    "$(get a-hg-unbatched r.publish_rate)" "$(get a-bull-always-unbatched r.rate)" higher
  row "unbatched, 64 requests in flight on PublishStream ($UNBATCHED msgs)" \
    "$(get a-hg-unbatched-stream r.publish_rate)" \
    "$(get a-bull-always-unbatched r.rate)" higher
  note "*same hourglass runs vs Redis appendfsync everysec (not durable per call)*"
  row "batches of 100 vs everysec" \
    "$(get a-hg-batched r.publish_rate)" "$(get a-bull-everysec-batched r.rate)" higher
  row "unbatched (calls) vs everysec" \
    "$(get a-hg-unbatched r.publish_rate)" "$(get a-bull-everysec-unbatched r.rate)" higher
  row "unbatched (PublishStream) vs everysec" \
    "$(get a-hg-unbatched-stream r.publish_rate)" \
    "$(get a-bull-everysec-unbatched r.rate)" higher
fi

# --- b. Steady load: lateness. ---------------------------------------------
if wanted b; then
  STEADY_S="$(seconds_of "$STEADY")"
  STEADY_COUNT=$(( STEADY_S * 10000 ))
  start_hourglassd b
  hg_bench b-hg --rate=10000 --count="$STEADY_COUNT" --batch=10 --producers=2 \
    --concurrency=16 --consumers=1 --delay=1s..10s
  start_redis b everysec
  (cd "$BULLMQ_DIR" && exec node bench.js worker --queue=b --count="$STEADY_COUNT" \
      --concurrency=100 --timeout-ms=30000 --port="$PORT") \
    >"$OUT/b-bull-worker.json" 2>"$OUT/b-bull-worker.err" &
  WORKER=$!
  bull b-bull-producer publish --queue=b --count="$STEADY_COUNT" --rate=10000 \
    --batch=10 --concurrency=16 --delay-ms=1000..10000
  wait "$WORKER" || log "bench.js worker failed: $(tail -n 1 "$OUT/b-bull-worker.err")"
  stop_server
  note "**b. steady 10,000 msg/s for $STEADY, delays uniform in [1 s, 10 s]** (sync vs everysec)"
  row "publish rate reached, msg/s" "$(get b-hg r.publish_rate)" "$(get b-bull-producer r.rate)" higher
  for p in p50 p90 p99 p99_9 max; do
    row "lateness ${p/_/.}, ms" "$(get b-hg "r.lateness_ms.$p")" \
      "$(get b-bull-worker "r.lateness_ms.$p")" lower
  done
  ROWS+=("| early deliveries | $(get b-hg r.early) | $(get b-bull-worker r.early) | |")
  ROWS+=("| delivered | $(get b-hg r.delivered) of $(get b-hg r.published) | $(get b-bull-worker r.delivered) of $(get b-bull-producer r.published) | |")
fi

# --- c. Hot second. --------------------------------------------------------
if wanted c; then
  # The instant must come after the last publish; give each side time for
  # its publishing at a pessimistic rate, plus 10 s.
  HG_HOT_S=$(( HOT / 20000 + 10 ))
  BULL_HOT_S=$(( HOT / 5000 + 10 ))
  start_hourglassd c
  hg_bench c-hg --count="$HOT" --batch=1000 --producers=2 --concurrency=8 \
    --consumers=2 --delay="hot:${HG_HOT_S}s"
  start_hourglassd c-single
  hg_bench c-hg-single --count="$HOT" --batch=1000 --producers=2 \
    --concurrency=8 --consumers=2 --consume=single --delay="hot:${HG_HOT_S}s"
  start_redis c everysec
  (cd "$BULLMQ_DIR" && exec node bench.js worker --queue=c --count="$HOT" \
      --concurrency=100 --timeout-ms=$(( (BULL_HOT_S + 60) * 1000 )) --port="$PORT") \
    >"$OUT/c-bull-worker.json" 2>"$OUT/c-bull-worker.err" &
  WORKER=$!
  bull c-bull-producer publish --queue=c --count="$HOT" --batch=1000 \
    --concurrency=8 --hot-ms=$(( BULL_HOT_S * 1000 ))
  wait "$WORKER" || log "bench.js worker failed: $(tail -n 1 "$OUT/c-bull-worker.err")"
  stop_server
  note "**c. hot second: $HOT messages due at one instant**"
  row "all delivered, seconds after the instant" \
    "$(node -e "console.log(Number('$(get c-hg r.lateness_ms.max)') / 1000)")" \
    "$(node -e "console.log(Number('$(get c-bull-worker r.lateness_ms.max)') / 1000)")" lower
  row "delivery rate, msg/s" "$(get c-hg r.delivery_rate)" "$(get c-bull-worker r.rate)" higher
  ROWS+=("| delivered | $(get c-hg r.delivered) of $(get c-hg r.published) | $(get c-bull-worker r.delivered) of $(get c-bull-producer r.published) | |")
  row "*consumers on Subscribe (a message per delivery):* all delivered, s" \
    "$(node -e "console.log(Number('$(get c-hg-single r.lateness_ms.max)') / 1000)")" \
    "$(node -e "console.log(Number('$(get c-bull-worker r.lateness_ms.max)') / 1000)")" lower
fi

# --- d. Pending messages: memory and disk. ---------------------------------
if wanted d; then
  start_hourglassd d
  hg_bench d-hg --consumers=0 --count="$PENDING" --batch=1000 --producers=2 \
    --concurrency=8 --delay=24h
  HG_RSS="$(rss_kib)"
  HG_DISK="$(disk_bytes)"
  start_redis d everysec
  bull d-bull publish --queue=d --count="$PENDING" --batch=1000 --concurrency=8 \
    --delay-ms=86400000
  BULL_RSS="$(rss_kib)"
  BULL_DISK="$(disk_bytes)"
  stop_server
  note "**d. $PENDING messages pending a day ahead**"
  row "server resident memory, MB" "$(( HG_RSS / 1024 ))" "$(( BULL_RSS / 1024 ))" lower
  row "bytes on disk, MB" "$(( HG_DISK / 1048576 ))" "$(( BULL_DISK / 1048576 ))" lower
  row "published, msg/s" "$(get d-hg r.publish_rate)" "$(get d-bull r.rate)" higher
fi

# --- The table. ------------------------------------------------------------
CPU="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo
echo "### $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($CPU), $(( $(grep MemTotal /proc/meminfo | tr -s ' ' | cut -d' ' -f2) / 1048576 )) GiB, commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo
echo "\`tests/bench/compare.sh $ARGS\`; load average before: $LOAD_BEFORE, after: $(cut -d' ' -f1-3 /proc/loadavg)."
echo "BullMQ $(node -p "require('$BULLMQ_DIR/node_modules/bullmq/package.json').version"), $(redis-server --version | cut -d' ' -f1-3), Node $(node --version)."
echo
echo "| workload | hourglass | BullMQ | hourglass advantage |"
echo "| --- | ---: | ---: | ---: |"
printf '%s\n' "${ROWS[@]}"

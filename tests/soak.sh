#!/usr/bin/env bash
# The soak test: hourglass_soak's producers, consumers and canceller against
# one hourglassd that this script restarts at random intervals, alternating
# SIGTERM and SIGKILL, on the same data directory. At the end the driver
# checks its ledger (tests/soak/ledger.h) and this script exits with its
# status, or 1 if the broker misbehaved on its side (did not stop on
# SIGTERM, stopped with an error, did not come back).
#
#   tests/soak.sh [--duration 60s] [--seed N] [--build-dir DIR] [-- DRIVER_FLAGS...]
#
# --duration: how long to produce and restart (s, m or h suffix; plain
#   seconds too). Default 60s.
# --seed: seeds the restart schedule and every choice of the driver;
#   HOURGLASS_SEED does the same. Default: a fresh one, logged.
# --build-dir: where hourglassd and hourglass_soak were built. Default
#   build/dev under the repository.
# Flags after -- go to hourglass_soak (e.g. --producers=4).
#
# The broker runs with --durability=sync (a successful Publish survives
# SIGKILL) and --horizon=1s, so that most messages (delays up to 3 s) wait
# on disk first and the loader's cursor is exercised across restarts.
#
# The broker listens on 127.0.0.1 on a port the OS picks at its first
# start; later starts ask for the same port (and fall back to a new one if
# it was taken), and the driver reads the address from a file rewritten at
# each start. Everything lives in a temporary directory removed at exit,
# unless HOURGLASS_SOAK_KEEP=1 (for post-mortems; its path is logged).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
duration=60s
seed=${HOURGLASS_SEED:-}
build_dir=$repo/build/dev
driver_flags=()

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
  exit 2
}

while (($# > 0)); do
  case $1 in
    --duration) duration=${2:?}; shift 2 ;;
    --duration=*) duration=${1#*=}; shift ;;
    --seed) seed=${2:?}; shift 2 ;;
    --seed=*) seed=${1#*=}; shift ;;
    --build-dir) build_dir=${2:?}; shift 2 ;;
    --build-dir=*) build_dir=${1#*=}; shift ;;
    --) shift; driver_flags=("$@"); break ;;
    -h|--help) usage ;;
    *) echo "soak.sh: unknown argument $1" >&2; usage ;;
  esac
done

# Seconds in a duration: 90, 90s, 10m, 1h.
seconds_of() {
  local d=$1
  case $d in
    *h) echo $((${d%h} * 3600)) ;;
    *m) echo $((${d%m} * 60)) ;;
    *s) echo $((${d%s})) ;;
    *) echo $((d)) ;;
  esac
}
duration_s=$(seconds_of "$duration")
if [[ -z $seed ]]; then
  seed=$(( $(od -An -N4 -tu4 /dev/urandom) ))
fi
# bash's RANDOM repeats its sequence for a seed: the restart schedule.
RANDOM=$((seed % 32768))

hourglassd=$build_dir/cmd/hourglassd/hourglassd
driver=$build_dir/tests/hourglass_soak
for f in "$hourglassd" "$driver"; do
  [[ -x $f ]] || { echo "soak.sh: $f is missing: build it first" >&2; exit 2; }
done

log() { echo "$(date +%H:%M:%S.%3N) soak.sh: $*"; }

work=$(mktemp -d "${TMPDIR:-/tmp}/hourglass-soak.XXXXXX")
broker_pid=
driver_pid=
cleanup() {
  local status=$?
  # Every child goes, whatever ended the script.
  [[ -n $driver_pid ]] && kill -KILL "$driver_pid" 2>/dev/null || true
  [[ -n $broker_pid ]] && kill -KILL "$broker_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  if [[ ${HOURGLASS_SOAK_KEEP:-0} == 1 ]]; then
    log "kept $work"
  else
    rm -rf "$work"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

failures=()
fail() { log "FAILURE: $*"; failures+=("$*"); }

starts=0
port=0
# Starts hourglassd on $port (0 at first) and waits until it listens; then
# records its address for the driver. Returns 1 if it did not come up.
start_broker() {
  local attempt
  for attempt in 1 2; do
    starts=$((starts + 1))
    local out=$work/broker.$starts.log
    : >"$out"  # Before the child opens it: the loop below reads it at once.
    "$hourglassd" --listen="127.0.0.1:$port" --metrics_listen=127.0.0.1:0 \
      --data_dir="$work/data" --durability=sync --horizon=1s >"$out" 2>&1 &
    broker_pid=$!
    local deadline=$((SECONDS + 60))
    while ! grep -q 'listening on' "$out"; do
      if ! kill -0 "$broker_pid" 2>/dev/null; then break; fi
      if ((SECONDS > deadline)); then
        fail "hourglassd (start $starts) did not listen within 60s"
        return 1
      fi
      sleep 0.05
    done
    if grep -q 'listening on' "$out"; then
      port=$(sed -n 's/.*listening on .* (port \([0-9]*\)).*/\1/p' "$out" | head -1)
      echo "127.0.0.1:$port" >"$work/addr.new"
      mv "$work/addr.new" "$work/addr"
      return 0
    fi
    wait "$broker_pid" 2>/dev/null || true
    broker_pid=
    # The old port was taken while the broker was down: take any.
    if ((port != 0)) && grep -q 'cannot listen on' "$out"; then
      log "port $port is taken; the broker moves to a new one"
      port=0
      continue
    fi
    fail "hourglassd (start $starts) exited before listening: $(tail -3 "$out")"
    return 1
  done
  return 1
}

# Waits up to $2 seconds for process $1 to exit; its status in $reaped.
# Quietly: bash would report a child killed by a signal on its stderr when
# it notices, after any command.
reaped=
wait_exit() {
  local pid=$1 deadline=$((SECONDS + $2))
  {
    while kill -0 "$pid"; do
      ((SECONDS > deadline)) && return 1
      sleep 0.05
    done
    reaped=0
    wait "$pid" || reaped=$?
  } 2>/dev/null
  return 0
}

# Stops the broker with signal $1 (TERM or KILL) and checks how it went; a
# restart unless $2 is "last".
stop_broker() {
  local signal=$1 last=${2:-}
  if ! kill -0 "$broker_pid" 2>/dev/null; then
    wait_exit "$broker_pid" 1 || true
    fail "hourglassd (start $starts) died on its own with status $reaped: $(tail -3 "$work/broker.$starts.log")"
  elif ! kill "-$signal" "$broker_pid" 2>/dev/null; then
    fail "hourglassd (start $starts) could not be sent SIG$signal"
  elif [[ $signal == TERM ]]; then
    if ! wait_exit "$broker_pid" 60; then
      fail "hourglassd (start $starts) did not stop within 60s of SIGTERM"
      kill -KILL "$broker_pid"
      wait_exit "$broker_pid" 60 || true
    elif ((reaped != 0)); then
      fail "hourglassd (start $starts) exited with $reaped after SIGTERM: $(tail -3 "$work/broker.$starts.log")"
    fi
  else
    wait_exit "$broker_pid" 60 || fail "hourglassd did not die of SIGKILL"
  fi
  broker_pid=
  [[ $last == last ]] || echo "SIG$signal" >>"$work/restarts"
}

log "seed $seed (HOURGLASS_SEED=$seed reproduces it), duration ${duration_s}s, work dir $work"
: >"$work/restarts"
start_broker || exit 1
log "hourglassd listens on 127.0.0.1:$port"

"$driver" --addr_file="$work/addr" --seed="$seed" --duration="${duration_s}s" \
  --restart_log="$work/restarts" "${driver_flags[@]}" &
driver_pid=$!

# Restarts at random intervals of 2 to 12 s until the duration is up; the
# first signal is drawn from the seed, then they alternate.
end=$((SECONDS + duration_s))
signals=(TERM KILL)
next_signal=$((RANDOM % 2))
while true; do
  pause=$((2 + RANDOM % 11))
  ((SECONDS + pause < end)) || break
  sleep "$pause"
  kill -0 "$driver_pid" 2>/dev/null || break  # The driver gave up early.
  signal=${signals[next_signal]}
  next_signal=$((1 - next_signal))
  log "restart: SIG$signal"
  stop_broker "$signal"
  # A moment down: clients see refused connections, not only resets.
  sleep "0.$((RANDOM % 10))"
  start_broker || break
done
log "no more restarts; the driver drains and checks"

driver_status=0
wait "$driver_pid" || driver_status=$?
driver_pid=
if [[ -n $broker_pid ]]; then
  stop_broker TERM last
fi
log "$(grep -c . "$work/restarts") restarts: $(sort "$work/restarts" | uniq -c | tr -s ' \n' ' ')"
if ((${#failures[@]} > 0)); then
  for f in "${failures[@]}"; do echo "BROKER FAILURE: $f"; done
  log "FAIL (seed $seed)"
  exit 1
fi
if ((driver_status != 0)); then
  log "FAIL: the driver exited with $driver_status (seed $seed)"
  exit "$driver_status"
fi
log "PASS (seed $seed)"

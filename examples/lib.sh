# Shared by examples/run.sh and examples/client_only.sh (sourced, not run):
# a temporary work directory removed at exit, and an hourglassd on a port
# the OS picks.
#
#   example_workdir NAME     sets $work to a new directory; at exit, kills the
#                            broker if one still runs and removes $work (kept,
#                            and said, with HOURGLASS_EXAMPLE_KEEP=1)
#   example_broker BINARY    starts BINARY on 127.0.0.1:0 with its data and
#                            log in $work; sets $broker_pid and $port once it
#                            listens; returns 1 (its log printed) if it does
#                            not within 60 s
#   example_broker_stop      SIGTERM, then waits; returns its exit status

example_workdir() {
  work=$(mktemp -d "${TMPDIR:-/tmp}/hourglass-$1.XXXXXX")
  broker_pid=
  trap example_cleanup EXIT
}

example_cleanup() {
  local status=$?
  if [[ -n $broker_pid ]]; then
    kill -KILL "$broker_pid" 2>/dev/null || true
    wait "$broker_pid" 2>/dev/null || true
  fi
  if [[ ${HOURGLASS_EXAMPLE_KEEP:-0} == 1 ]]; then
    echo "examples: kept $work"
  else
    rm -rf "$work"
  fi
  exit "$status"
}

example_broker() {
  local out=$work/broker.log
  : >"$out"
  "$1" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 \
    --data_dir="$work/data" --shutdown_grace=1s >"$out" 2>&1 &
  broker_pid=$!
  local deadline=$((SECONDS + 60))
  until grep -q 'listening on' "$out"; do
    if ! kill -0 "$broker_pid" 2>/dev/null || ((SECONDS > deadline)); then
      echo "hourglassd did not start listening:" >&2
      cat "$out" >&2
      return 1
    fi
    sleep 0.05
  done
  port=$(sed -n 's/.*listening on .* (port \([0-9]*\)).*/\1/p' "$out" | head -1)
}

example_broker_stop() {
  kill -TERM "$broker_pid"
  local status=0
  wait "$broker_pid" || status=$?
  broker_pid=
  return "$status"
}

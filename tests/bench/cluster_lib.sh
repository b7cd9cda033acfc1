# tests/bench/cluster_lib.sh: what cluster.sh and rebalance.sh share. Sourced
# (after BUILD is set), not run. It defines HOURGLASSD, BENCH and CLI (and
# checks them and etcd), WORK (a directory of its own, removed at exit with
# every process in PIDS killed), free_port, now, port_of, start_etcd,
# which starts one etcd member on free loopback ports and sets ETCD_PORT, and
# PEER_FLAG, the --peer_token_file flag every node of the run shares.
# SCRIPT names the caller in errors.

SCRIPT="$(basename "${BASH_SOURCE[1]}")"
HOURGLASSD="$BUILD/cmd/hourglassd/hourglassd"
BENCH="$BUILD/cmd/hourglass-bench/hourglass-bench"
CLI="$BUILD/cmd/hourglass/hourglass"
for f in "$HOURGLASSD" "$BENCH" "$CLI"; do
  [ -x "$f" ] || { echo "$SCRIPT: $f is missing (build the release preset)" >&2; exit 2; }
done
command -v etcd >/dev/null || { echo "$SCRIPT: etcd is missing (deploy/setup.sh)" >&2; exit 2; }

WORK="$(mktemp -d "/tmp/hourglass-${SCRIPT%.sh}-XXXXXX")"
declare -A PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
# The secret the nodes share (hourglassd --peer_token_file).
(umask 077 && python3 -c 'import secrets; print(secrets.token_hex(32))' >"$WORK/peer-secret")
PEER_FLAG="--peer_token_file=$WORK/peer-secret"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }
port_of() {  # LOG -> the port hourglassd listens on, once it logged it
  for _ in $(seq 1 400); do
    local p
    p="$(grep -o 'listening on [^ ]* (port [0-9]*)' "$1" 2>/dev/null | grep -o '[0-9]*)$' | tr -d ')' || true)"
    if [ -n "$p" ]; then echo "$p"; return; fi
    sleep 0.05
  done
  echo "$SCRIPT: no port in $1" >&2; exit 1
}

start_etcd() {
  ETCD_PORT="$(free_port)"
  local peer_port
  peer_port="$(free_port)"
  etcd --name=bench --data-dir="$WORK/etcd" \
    --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls="http://127.0.0.1:$peer_port" --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
    --initial-cluster="bench=http://127.0.0.1:$peer_port" >"$WORK/etcd.log" 2>&1 &
  PIDS[etcd]=$!
}

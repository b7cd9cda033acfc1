# One broker at a time for the comparisons against BullMQ (compare.sh,
# node_clients.sh): hourglassd or Redis on a free loopback port, stopped
# before the next starts. Sourced; the caller defines log, and sets WORK (a
# scratch directory), OUT (where the servers' logs go) and HOURGLASSD.
# Each start sets PORT, SERVER_PID and SERVER_DIR.

SERVER_PID=""
SERVER_DIR=""
PORT=""

stop_server() {
  if [ -n "$SERVER_PID" ]; then
    kill "$SERVER_PID" 2>/dev/null || true
    # Waits for its exit (it is not our child when Redis daemonizes, so poll).
    for _ in $(seq 1 300); do
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$SERVER_PID" 2>/dev/null || true
  fi
  SERVER_PID=""
  [ -z "$SERVER_DIR" ] || rm -rf "$SERVER_DIR"
  SERVER_DIR=""
}

free_port() {
  node -e "const s=require('net').createServer();s.listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"
}

wait_listening() {  # PORT
  for _ in $(seq 1 200); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.05
  done
  log "nothing listens on 127.0.0.1:$1"
  return 1
}

start_hourglassd() {  # NAME
  stop_server
  SERVER_DIR="$WORK/$1"
  mkdir -p "$SERVER_DIR"
  PORT="$(free_port)"
  "$HOURGLASSD" --listen="127.0.0.1:$PORT" --data_dir="$SERVER_DIR/data" \
    --metrics_listen=127.0.0.1:0 --durability=sync >"$OUT/$1.hourglassd.log" 2>&1 &
  SERVER_PID=$!
  wait_listening "$PORT"
}

start_redis() {  # NAME APPENDFSYNC
  stop_server
  SERVER_DIR="$WORK/$1"
  mkdir -p "$SERVER_DIR"
  PORT="$(free_port)"
  redis-server --bind 127.0.0.1 --port "$PORT" --dir "$SERVER_DIR" --save '' \
    --appendonly yes --appendfsync "$2" --maxmemory 0 \
    --logfile "$OUT/$1.redis.log" --daemonize yes --pidfile "$SERVER_DIR/redis.pid"
  wait_listening "$PORT"
  SERVER_PID="$(cat "$SERVER_DIR/redis.pid")"
}

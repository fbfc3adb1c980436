# shellcheck shell=bash
# Sourced by bench/bench.sh: a work folder ($work,
# binaries in $bin) removed on exit together with every process whose pid
# is added to pids; the CPUs the servers and the load tool run on
# (server_cpu, load_cpu: with two or more CPUs, CPU 0 and CPU 1 through
# taskset, so that they do not compete); free_port and wait_port; and
# start_listener and start_http_server, which start a server on a free
# port.

work=$(mktemp -d)
bin=$work/bin
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

server_cpu=() load_cpu=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  server_cpu=(taskset -c 0) load_cpu=(taskset -c 1)
fi

# free_port prints a free TCP port on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 20000))
}

# wait_port waits until 127.0.0.1:$1 accepts connections.
wait_port() {
  for _ in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "nothing listens on port $1" >&2
  return 1
}

# start_listener CMD [ARGS...]: runs CMD ARGS on the servers' CPU, every
# "@port" in ARGS replaced by a free port, and sets srv_pid and srv_url
# (http://127.0.0.1:PORT/mcp) once it accepts connections.
start_listener() {
  local port a args=()
  port=$(free_port)
  for a in "$@"; do args+=("${a//@port/$port}"); done
  "${server_cpu[@]}" "${args[@]}" 2>/dev/null &
  srv_pid=$!
  pids+=("$srv_pid")
  srv_url=http://127.0.0.1:$port/mcp
  wait_port "$port"
}

# start_http_server BIN [ARGS...]: start_listener for a server that takes
# its address as -http ADDR.
start_http_server() {
  local bin=$1
  shift
  start_listener "$bin" -http 127.0.0.1:@port "$@"
}

# wait_gateway PORT LOG: waits until the mcpgw on PORT is ready and its
# servers run; otherwise prints its LOG and fails.
wait_gateway() {
  wait_port "$1"
  for _ in $(seq 1 400); do
    [ "$(curl -s "http://127.0.0.1:$1/readyz" | jq -r .status 2>/dev/null)" = ready ] &&
      curl -s "http://127.0.0.1:$1/metrics" | grep -q 'mcpgw_upstream_state{.*mcpgw_state="running"' && return 0
    sleep 0.05
  done
  echo "mcpgw on port $1 did not get ready; its log:" >&2
  cat "$2" >&2
  return 1
}

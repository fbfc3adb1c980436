#!/usr/bin/env bash
# Runs mcpgw's published benchmarks on this machine and prints the
# BENCHMARKS.md table (markdown) on stdout; one JSON report per run goes
# to $OUT (default ./bench-results.jsonl).
#
#   bench/bench.sh                                  # 3 rounds of 5 s runs
#   ROUNDS=5 DURATION=10s bench/bench.sh            # longer, steadier
#   COMPARE="old=/path/to/mcpgw" bench/bench.sh     # and other builds beside this one
#
# Each case runs directly against the upstream (the limit) and through
# mcpgw, with bench/mcpgw-bench, and the floor server (bench/floorserver:
# a bare net/http echo, the least a server on this machine spends per
# call) runs beside them: ratios are taken within a run, never between
# runs. The small-call and 64 KiB cases run ROUNDS times, interleaved, so
# that each case's runs see the same drift of the machine's speed; the
# table gives medians. With COMPARE (space-separated LABEL=BINARY), each
# of those builds serves every mcpgw case too, in the same rounds, and a
# second table sets them beside this build.
#
# With two or more CPUs the servers (mcpgw, the upstreams, the floor) run
# on CPU 0 and the load tool on CPU 1 (taskset), so that they do not
# compete. mcpgw runs on its defaults plus the servers of each case.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5s}
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-bench-results.jsonl}
SESSIONS=${SESSIONS:-"1 8 64"}
IDLE=${IDLE:-10000}
TOOLS=${TOOLS:-10000}
COMPARE=${COMPARE:-}
if ! [[ $ROUNDS =~ ^[1-9][0-9]*$ ]]; then
  echo "ROUNDS must be a whole number of 1 or more, not \"$ROUNDS\"" >&2
  exit 2
fi
declare -A binary=()
builds=(mcpgw)
for c in $COMPARE; do
  label=${c%%=*} path=${c#*=}
  if ! [[ $label =~ ^[a-z0-9][a-z0-9._-]*$ ]] || [ "$label" = mcpgw ] || [ "$label" = "$c" ] || ! [ -x "$path" ]; then
    echo "COMPARE entry \"$c\" is not LABEL=BINARY with a label of a-z, 0-9, ., _ and - (not mcpgw) and an executable mcpgw" >&2
    exit 2
  fi
  binary[$label]=$path
  builds+=("$label")
done

# shellcheck source=bench/lib.sh
source bench/lib.sh

echo "building into $bin" >&2
# mcpgw as the Dockerfile builds it: static, no cgo, stripped.
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/" ./cmd/mcpgw
go build -o "$bin/" ./bench/mcpgw-bench ./bench/floorserver ./examples/demo-server ./e2e/fixtures/catalogserver
binary[mcpgw]=$bin/mcpgw
gateway_bin() { echo "${binary[$1]}"; }

: >"$OUT"

# start_gateway BINARY SERVERS_YAML [TOP_LEVEL_YAML]: starts that mcpgw
# with those servers (and settings) and sets gw_pid and gw_url once it is
# ready and its servers run.
start_gateway() {
  local port dir
  port=$(free_port)
  dir=$(mktemp -d "$work/gw.XXXX")
  printf 'listen: 127.0.0.1:%s\ndata_dir: %s/data\nlog:\n  level: warn\n%s\nservers:\n%s\n' "$port" "$dir" "${3:-}" "$2" >"$dir/mcpgw.yaml"
  "${server_cpu[@]}" "$1" serve --config "$dir/mcpgw.yaml" 2>"$dir/log" &
  gw_pid=$!
  pids+=("$gw_pid")
  gw_url=http://127.0.0.1:$port/mcp
  wait_gateway "$port" "$dir/log"
}

stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# run CASE VIA ARGS...: one run of the load tool; its JSON report, tagged
# with the case, the via and the round, goes to $OUT.
round=1
run() {
  local label=$1 via=$2
  shift 2
  echo "  $label ($via)" >&2
  local rep
  rep=$("${load_cpu[@]}" "$bin/mcpgw-bench" -json -duration "$DURATION" "$@" || true)
  [ -n "$rep" ] || { echo "    no report" >&2; return; }
  jq -c --arg case "$label" --arg via "$via" --argjson round "$round" '. + {case: $case, via: $via, round: $round}' <<<"$rep" >>"$OUT"
}

echo "starting the servers" >&2
start_http_server "$bin/floorserver"
floor_pid=$srv_pid floor_url=$srv_url
start_http_server "$bin/demo-server"
http_pid=$srv_pid http_url=$srv_url
declare -A gws_pid gws_url gwh_pid gwh_url
for b in "${builds[@]}"; do
  start_gateway "$(gateway_bin "$b")" "  - {name: demo, transport: stdio, command: $bin/demo-server}"
  gws_pid[$b]=$gw_pid gws_url[$b]=$gw_url
  start_gateway "$(gateway_bin "$b")" "  - {name: demo, transport: http, url: $http_url}"
  gwh_pid[$b]=$gw_pid gwh_url[$b]=$gw_url
done

for round in $(seq 1 "$ROUNDS"); do
  echo "round $round of $ROUNDS" >&2
  for s in $SESSIONS; do
    run "floor, $s sessions" floor -url "$floor_url" -sessions "$s" -tool echo -watch "$floor_pid"
    run "stdio, $s sessions" direct -sessions "$s" -tool echo -direct -- "${server_cpu[@]}" "$bin/demo-server"
    for b in "${builds[@]}"; do
      run "stdio, $s sessions" "$b" -url "${gws_url[$b]}" -sessions "$s" -tool mcp__demo__echo -watch "${gws_pid[$b]}"
    done
    run "http, $s sessions" direct -url "$http_url" -sessions "$s" -tool echo -watch "$http_pid"
    for b in "${builds[@]}"; do
      run "http, $s sessions" "$b" -url "${gwh_url[$b]}" -sessions "$s" -tool mcp__demo__echo -watch "${gwh_pid[$b]}"
    done
  done
  run "64 KiB result, stdio, 8 sessions" direct -sessions 8 -tool echo -payload 65536 -direct -- "${server_cpu[@]}" "$bin/demo-server"
  for b in "${builds[@]}"; do
    run "64 KiB result, stdio, 8 sessions" "$b" -url "${gws_url[$b]}" -sessions 8 -tool mcp__demo__echo -payload 65536 -watch "${gws_pid[$b]}"
  done
done
round=1
for b in "${builds[@]}"; do stop "${gws_pid[$b]}"; stop "${gwh_pid[$b]}"; done
stop "$http_pid"
stop "$floor_pid"

echo "tools/list of $TOOLS tools" >&2
names=$(seq -f 'tool%05g' 1 "$TOOLS" | paste -sd, -)
last=$(printf 'tool%05d' "$TOOLS")
catalog=(-name big -page-size "$TOOLS" -tools "$names")
run "tools/list of $TOOLS tools, 8 sessions" direct -sessions 8 -method tools/list -direct -- "${server_cpu[@]}" "$bin/catalogserver" "${catalog[@]}"
for b in "${builds[@]}"; do
  start_gateway "$(gateway_bin "$b")" "  - {name: big, transport: stdio, command: $bin/catalogserver, args: [-name, big, -page-size, \"$TOOLS\", -tools, \"$names\"]}"
  # The catalog is merged once the server's list has come: wait for a
  # list that holds the last tool.
  for _ in $(seq 1 100); do
    "$bin/mcpgw-bench" -url "$gw_url" -method tools/list -requests 1 -warmup 0s -duration 5s -expect "$last" >/dev/null 2>&1 && break
    sleep 0.1
  done
  run "tools/list of $TOOLS tools, 8 sessions" "$b" -url "$gw_url" -sessions 8 -method tools/list -expect "$last" -watch "$gw_pid"
  stop "$gw_pid"
done

echo "$IDLE idle sessions" >&2
for b in "${builds[@]}"; do
  # The default caps (1000 sessions per principal, 10000 in all) are
  # raised for this case only.
  start_gateway "$(gateway_bin "$b")" "  - {name: demo, transport: stdio, command: $bin/demo-server}" "sessions: {max: $((IDLE + 100)), max_per_principal: $((IDLE + 100))}"
  run "$IDLE idle sessions" "$b" -url "$gw_url" -idle "$IDLE" -duration 5s -watch "$gw_pid"
  stop "$gw_pid"
done

echo
echo "Machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -sr), $(go version | cut -d' ' -f3). Servers on CPU 0, the load tool on CPU 1: ${load_cpu[*]:-no}. $ROUNDS interleaved rounds of $DURATION runs; medians."
echo
jq -rs -f bench/table.jq "$OUT"

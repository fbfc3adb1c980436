#!/usr/bin/env bash
# Makes cmd/mcpgw/mcpgw.pgo, the CPU profile that the release builds of
# mcpgw (`make build`, the Dockerfile, scripts/bench.sh) give to
# `go build -pgo` for profile-guided optimization. It is not named
# default.pgo, which `go build` and `go test` would take by themselves:
# the tests would then compile every package of mcpgw a second time,
# with the profile, for about 100 s more per kind of build on two cores.
#
#   scripts/pgo.sh                 # 6 s per load, writes cmd/mcpgw/mcpgw.pgo
#   LOAD_SECONDS=10 scripts/pgo.sh # longer, steadier profile
#   PGO_OUT=/tmp/x.pgo scripts/pgo.sh  # elsewhere (a relative path is from the repo root)
#
# The profile is of the bench's mix of loads (scripts/bench.sh), taken
# from a running mcpgw through the admin API's CPU profile
# (GET /admin/debug/pprof/profile): small echo calls at 1, 8 and 64
# sessions over a stdio upstream (leanecho) and over an HTTP one (the
# floor server), the demo server over both at 8 sessions, a 64 KiB result
# over stdio, and tools/list. The mcpgw it profiles is built without PGO,
# so that the profile does not depend on the one it replaces.
#
# With two or more CPUs, the servers run on CPU 0 and the load tool on
# CPU 1, as in the bench.
set -euo pipefail
cd "$(dirname "$0")/.."

LOAD_SECONDS=${LOAD_SECONDS:-6}
PGO_OUT=${PGO_OUT:-cmd/mcpgw/mcpgw.pgo}
if ! [[ $LOAD_SECONDS =~ ^[1-9][0-9]*$ ]]; then
  echo "LOAD_SECONDS must be a whole number of 1 or more, not \"$LOAD_SECONDS\"" >&2
  exit 2
fi

# shellcheck source=scripts/lib.sh
source scripts/lib.sh

echo "building into $bin" >&2
CGO_ENABLED=0 go build -pgo=off -trimpath -ldflags "-s -w" -o "$bin/" ./cmd/mcpgw
go build -o "$bin/" ./cmd/mcpgw-bench ./examples/demo-server ./e2e/fixtures/floorserver ./e2e/fixtures/leanecho

start_http_server "$bin/floorserver"
floor_url=$srv_url
start_http_server "$bin/demo-server"
demo_url=$srv_url

# An admin token for this run only; the config keeps its SHA-256.
token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
hash=$(printf %s "$token" | sha256sum | cut -d' ' -f1)
port=$(free_port)
cat >"$work/mcpgw.yaml" <<EOF
listen: 127.0.0.1:$port
data_dir: $work/data
log:
  level: warn
admin:
  tokens: ["sha256:$hash"]
servers:
  - {name: lean, transport: stdio, command: $bin/leanecho}
  - {name: demo, transport: stdio, command: $bin/demo-server}
  - {name: floor, transport: http, url: $floor_url}
  - {name: demohttp, transport: http, url: $demo_url}
EOF
"${server_cpu[@]}" "$bin/mcpgw" serve --config "$work/mcpgw.yaml" 2>"$work/log" &
gw_pid=$!
pids+=("$gw_pid")
base=http://127.0.0.1:$port
wait_port "$port"
# Ready when the catalog holds the tools of all four servers.
ready=
for _ in $(seq 1 200); do
  if [ "$(curl -s "$base/readyz" | jq -r .status 2>/dev/null)" = ready ] &&
    [ "$(curl -s -H "Authorization: Bearer $token" "$base/admin/tools" | jq '[.tools[].name | split("__")[1]] | unique | length' 2>/dev/null)" = 4 ]; then
    ready=1
    break
  fi
  sleep 0.05
done
if [ -z "$ready" ]; then
  echo "mcpgw did not list the tools of all four servers within 10 s; its log:" >&2
  cat "$work/log" >&2
  exit 1
fi

loads=(
  "-sessions 1 -tool mcp__lean__echo"
  "-sessions 8 -tool mcp__lean__echo"
  "-sessions 64 -tool mcp__lean__echo"
  "-sessions 1 -tool mcp__floor__echo"
  "-sessions 8 -tool mcp__floor__echo"
  "-sessions 64 -tool mcp__floor__echo"
  "-sessions 8 -tool mcp__demo__echo"
  "-sessions 8 -tool mcp__demohttp__echo"
  "-sessions 8 -tool mcp__lean__echo -payload 65536"
  "-sessions 8 -method tools/list"
)
seconds=$((${#loads[@]} * LOAD_SECONDS + 1))
echo "profiling mcpgw for $seconds s under ${#loads[@]} loads" >&2
curl -sS --fail-with-body -o "$work/cpu.pgo" -H "Authorization: Bearer $token" \
  "$base/admin/debug/pprof/profile?seconds=$seconds" &
curl_pid=$!
pids+=("$curl_pid") # stopped with the rest when a load fails
sleep 0.5
for l in "${loads[@]}"; do
  # shellcheck disable=SC2086 # each load is a list of flags
  rep=$("${load_cpu[@]}" "$bin/mcpgw-bench" -json -duration "${LOAD_SECONDS}s" -url "$base/mcp" $l)
  echo "  $l: $(jq -r '"\(.requests) requests, \(.errors) errors"' <<<"$rep")" >&2
  if [ "$(jq -r .errors <<<"$rep")" != 0 ]; then
    echo "the load $l had errors; no profile written" >&2
    exit 1
  fi
done
if ! wait "$curl_pid"; then
  echo "the admin API gave no profile:" >&2
  cat "$work/cpu.pgo" >&2
  exit 1
fi
mv "$work/cpu.pgo" "$PGO_OUT"
echo "wrote $PGO_OUT ($(wc -c <"$PGO_OUT") bytes)" >&2

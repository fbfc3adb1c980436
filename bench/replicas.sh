#!/usr/bin/env bash
# What a replica costs: PostgreSQL against SQLite per small call and per
# hosted task, and a forwarded request against a local one, as ratios
# measured in one run. Prints the BENCHMARKS.md "Replicas" tables
# (markdown) on stdout; one JSON report per run goes to $OUT (default
# ./bench-replicas.jsonl).
#
#   bench/replicas.sh                          # 3 rounds of 5 s runs, 8 sessions
#   ROUNDS=5 DURATION=10s bench/replicas.sh    # longer, steadier
#
# It starts a throwaway PostgreSQL (scripts/postgres.sh), the demo server
# over HTTP as the one upstream, one mcpgw on SQLite and two mcpgw
# replicas on that PostgreSQL (cluster enabled, each at its own port), all
# with the same secret and tasks.promote_after: 0s (every call of a
# 2026-07-28 client that declares the tasks extension is a task). Each
# round runs, one after the other:
#
#   call, SQLite         2025 sessions on the SQLite mcpgw
#   call, PG local       sessions initialized at replica 1 and loaded there
#   call, PG forwarded   initialized at replica 1, loaded at replica 2, which
#                        forwards each request to replica 1 (mcpgw-bench
#                        -init-url); without forwarding every call would fail
#   task, SQLite         hosted tasks (mcpgw-bench -task) on the SQLite mcpgw
#   task, PG             hosted tasks on replica 1
#
# mcpgw's CPU per call in the PG call cases is both replicas' together; in
# the others, the one mcpgw's. PostgreSQL's (its postmaster and every
# backend) is given beside it in the PG cases, since SQLite's work is done
# inside mcpgw and PostgreSQL's mostly outside. Ratios are taken within each round and the
# tables give their medians, as in bench/bench.sh; servers run on CPU 0
# and the load tool on CPU 1 (taskset).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5s}
ROUNDS=${ROUNDS:-3}
SESSIONS=${SESSIONS:-8}
OUT=${OUT:-bench-replicas.jsonl}
for v in ROUNDS SESSIONS; do
  if ! [[ ${!v} =~ ^[1-9][0-9]*$ ]]; then
    echo "$v must be a whole number of 1 or more, not \"${!v}\"" >&2
    exit 2
  fi
done
if ! [[ $DURATION =~ ^[1-9][0-9]*(ms|s|m)$ ]]; then
  echo "DURATION must be a Go duration such as 5s, not \"$DURATION\"" >&2
  exit 2
fi
# Hosted tasks are capped per principal (tasks.max_hosted_per_principal,
# 16 by default); each session has one running.
if [ "$SESSIONS" -gt 16 ]; then
  echo "SESSIONS must be at most 16: each session runs a hosted task at a time, and mcpgw caps them at 16 per principal" >&2
  exit 2
fi

# shellcheck source=bench/lib.sh
source bench/lib.sh

# The database lives outside $work: postgres.sh hands its folder to user
# nobody under root, and $work is not reachable by nobody.
pgdir=$(mktemp -d)
on_exit() {
  cleanup # the gateways first, then their database
  scripts/postgres.sh stop "$pgdir" >/dev/null 2>&1 || rm -rf "$pgdir"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "building into $bin" >&2
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/" ./cmd/mcpgw
go build -o "$bin/" ./bench/mcpgw-bench ./examples/demo-server

echo "starting PostgreSQL" >&2
dsn=$(scripts/postgres.sh start "$pgdir")
# The postmaster's pid is the first line of postmaster.pid; its children
# are the backends.
pg_pid=$(head -n 1 "$pgdir/data/postmaster.pid")
secret=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')

: >"$OUT"

# start_gateway NAME TOP_LEVEL_YAML: starts an mcpgw in front of the demo
# server with those settings (@port in them is its port) and sets gw_pid
# and gw_url once it is ready and its server runs.
start_gateway() {
  local port dir
  port=$(free_port)
  dir=$work/$1
  mkdir -p "$dir"
  printf 'listen: 127.0.0.1:%s\ndata_dir: %s/data\nlog:\n  level: warn\nsecret: %s\ntasks: {promote_after: 0s}\n%s\nservers:\n  - {name: demo, transport: http, url: %s}\n' \
    "$port" "$dir" "$secret" "${2//@port/$port}" "$http_url" >"$dir/mcpgw.yaml"
  "${server_cpu[@]}" "$bin/mcpgw" serve --config "$dir/mcpgw.yaml" 2>"$dir/log" &
  gw_pid=$!
  pids+=("$gw_pid")
  gw_url=http://127.0.0.1:$port/mcp
  wait_gateway "$port" "$dir/log"
}

# run CASE ARGS...: one run of the load tool; its JSON report, tagged with
# the case and the round, goes to $OUT.
run() {
  local label=$1
  shift
  echo "  $label" >&2
  local rep
  rep=$("${load_cpu[@]}" "$bin/mcpgw-bench" -json -duration "$DURATION" -sessions "$SESSIONS" -tool mcp__demo__echo "$@" || true)
  [ -n "$rep" ] || { echo "    no report" >&2; return; }
  jq -c --arg case "$label" --argjson round "$round" --argjson pg "$pg_pid" '. + {case: $case, round: $round, pg_pid: $pg}' <<<"$rep" >>"$OUT"
}

echo "starting the servers" >&2
start_http_server "$bin/demo-server"
http_url=$srv_url
start_gateway sqlite ""
sq_pid=$gw_pid sq_url=$gw_url
pg() { printf 'store: {driver: postgres, dsn: "%s"}\ncluster: {enabled: true, replica_id: %s, self_url: "http://127.0.0.1:@port"}' "$dsn" "$1"; }
start_gateway r1 "$(pg r1)"
r1_pid=$gw_pid r1_url=$gw_url
start_gateway r2 "$(pg r2)"
r2_pid=$gw_pid r2_url=$gw_url

for round in $(seq 1 "$ROUNDS"); do
  echo "round $round of $ROUNDS" >&2
  run "call, SQLite" -url "$sq_url" -watch "$sq_pid"
  run "call, PG local" -url "$r1_url" -watch "$r1_pid" -watch "$r2_pid" -watch "$pg_pid"
  run "call, PG forwarded" -init-url "$r1_url" -url "$r2_url" -watch "$r1_pid" -watch "$r2_pid" -watch "$pg_pid"
  run "task, SQLite" -task -url "$sq_url" -watch "$sq_pid"
  run "task, PG" -task -url "$r1_url" -watch "$r1_pid" -watch "$r2_pid" -watch "$pg_pid"
done

echo
echo "Machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -sr), $(go version | cut -d' ' -f3), PostgreSQL $("$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)/postgres" --version 2>/dev/null | awk '{print $3}'). Servers on CPU 0, the load tool on CPU 1: ${load_cpu[*]:-no}. $ROUNDS interleaved rounds of $DURATION runs, $SESSIONS sessions; medians. Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
echo
jq -rs -f bench/replicas.jq "$OUT"

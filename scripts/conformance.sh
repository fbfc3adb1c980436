#!/usr/bin/env bash
# conformance.sh: runs the official MCP server conformance suite
# (npm @modelcontextprotocol/conformance) through mcpgw and compares the
# results, scenario by scenario, with the reference server's own.
#
# Usage: scripts/conformance.sh [--only http|stdio] [--scenario NAME] [--help]
#
# The reference server is the Go SDK's conformance everything-server, which
# passes every scenario of the suite. The "active" scenarios run four times,
# each against processes started for that run alone:
#   (a) baseline A      the everything-server over streamable HTTP, directly
#   (b) http upstream   mcpgw in front of the everything-server over HTTP;
#                       compared with (a)
#   (c) baseline B      the stand-in for the stdio case: the suite speaks only
#                       HTTP, so the server's stdio mode cannot be tested
#                       directly; the same binary over HTTP stands in for it
#   (d) stdio upstream  mcpgw in front of the same binary as a stdio child;
#                       compared with (c)
# A scenario that passes on the baseline must pass through mcpgw unless it is
# in the run's list in conformance/expected-failures.yaml; a listed scenario
# that passes is an error too (remove it from the list). conformance/README.md
# explains the output and the list.
#
# Options:
#   --only http|stdio   run (a)+(b) or (c)+(d) only
#   --scenario NAME     run one scenario instead of the active suite
#                       (names: see "conformance list --server" in the README)
#   -h, --help          print this help
#
# Environment:
#   MCPGW_CONFORMANCE_CACHE  where the tools are installed and kept between
#                            runs; default ${XDG_CACHE_HOME:-$HOME/.cache}/mcpgw-conformance
#   CONFORMANCE_OUT          folder for the results (kept); default a new
#                            temporary folder. Each run gets a subfolder with
#                            conformance.log, results/*/checks.json, the
#                            servers' logs and, for (b) and (d), the filled-in
#                            mcpgw.yaml and mcpgw's own log (mcpgw.log).
#
# Needs go, node and npm (Node 20 is enough: if node is older than 22, the
# suite's Node 22 is installed from npm, package "node", into the cache).
# Installs, all pinned: node@22.23.3 (only then), the suite from
# conformance/package-lock.json, and everything-server from the Go SDK at
# v1.8.0; mcpgw itself is built from this tree on every run. Every Node
# process gets conformance/loopback-listen.cjs preloaded, so none listens
# beyond 127.0.0.1, and the suite only ever targets loopback URLs.
#
# Exit status: 0 if every run matches its baseline and the list, 1 on a
# regression, a listed scenario that passes or a failing baseline, 2 if
# the tools could not be installed or a server did not start.

# shellcheck disable=SC2317 # cleanup and the install steps run through trap and install_into
set -euo pipefail

readonly GO_SDK_VERSION=v1.8.0
readonly EVERYTHING_PKG=github.com/modelcontextprotocol/go-sdk/conformance/everything-server
readonly NODE_VERSION=22.23.3 # used only when the machine's node is older than 22
readonly SUITE_TIMEOUT=300    # seconds for one run of the suite

ROOT=$(cd "$(dirname "$0")/.." && pwd)
readonly ROOT
readonly CONF_DIR="$ROOT/conformance"
readonly EXPECTED="$CONF_DIR/expected-failures.yaml"
CACHE=${MCPGW_CONFORMANCE_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/mcpgw-conformance}

say() { printf 'conformance: %s\n' "$*"; }
die() { printf 'conformance: error: %s\n' "$*" >&2; exit 2; }

only=""
scenario=""
while [ $# -gt 0 ]; do
  case "$1" in
    --only) only=${2:-}; shift 2 || die "--only needs http or stdio" ;;
    --scenario) scenario=${2:-}; shift 2 || die "--scenario needs a name" ;;
    -h | --help) sed -n '2,/^$/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
case "$only" in "" | http | stdio) ;; *) die "--only takes http or stdio" ;; esac
[ -z "$scenario" ] || [[ $scenario =~ ^[a-z0-9-]+$ ]] || die "bad scenario name $scenario"

for tool in go node npm sha256sum timeout od; do
  command -v "$tool" >/dev/null || die "$tool is required"
done

# --- processes ------------------------------------------------------------
# started holds the pids of the processes started for the current run;
# stop_started stops them, newest first, at the end of each run and on exit.
# watched holds pids that were started by a process of ours (mcpgw's stdio
# server): each must be gone once its parent is stopped.
started=()
watched=()
tmp=""

stop_pid() {
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 150); do # mcpgw takes up to shutdown_grace (2s) and its servers' stop
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    say "pid $pid did not stop within 15s of SIGTERM; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

stop_started() {
  local i pid
  for ((i = ${#started[@]} - 1; i >= 0; i--)); do stop_pid "${started[i]}"; done
  started=()
  for pid in ${watched[@]+"${watched[@]}"}; do
    if kill -0 "$pid" 2>/dev/null; then
      say "warning: pid $pid (mcpgw's stdio server) outlived mcpgw; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  watched=()
}

cleanup() {
  local rc=$?
  trap - EXIT
  stop_started
  [ -z "$tmp" ] || rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcpgw-conformance.XXXXXX")

# --- tools ----------------------------------------------------------------
# Every Node process from here on, npm included, keeps its listeners on
# loopback.
export NODE_OPTIONS="--require \"$CONF_DIR/loopback-listen.cjs\"${NODE_OPTIONS:+ $NODE_OPTIONS}"
mkdir -p "$CACHE"
t0=$SECONDS

# install_into DIR CMD...: runs CMD with $stage set to a fresh staging
# folder next to DIR, then moves it to DIR, so an interrupted install never
# leaves a half-filled DIR behind.
install_into() {
  local dir=$1
  shift
  stage="$dir.partial.$$"
  rm -rf "$stage"
  mkdir -p "$stage"
  "$@" || { rm -rf "$stage"; die "installing $dir failed"; }
  rm -rf "$dir"
  mv "$stage" "$dir"
}

NODE=$(command -v node)
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 22 ]; then
  NODE="$CACHE/node-$NODE_VERSION/node_modules/node/bin/node"
  if [ ! -x "$NODE" ]; then
    say "node $(node --version) is older than 22; installing node@$NODE_VERSION from npm into $CACHE"
    npm_node() { npm install --prefix "$stage" --no-save --no-audit --no-fund --loglevel=error "node@$NODE_VERSION"; }
    install_into "$CACHE/node-$NODE_VERSION" npm_node
  fi
fi
say "node $("$NODE" --version) ($NODE)"

lock_sum=$(sha256sum "$CONF_DIR/package-lock.json" | cut -c1-12)
SUITE_DIR="$CACHE/suite-$lock_sum"
CLI="$SUITE_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"
if [ ! -f "$CLI" ]; then
  say "installing the conformance suite (conformance/package-lock.json) into $SUITE_DIR"
  npm_suite() {
    cp "$CONF_DIR/package.json" "$CONF_DIR/package-lock.json" "$stage/" &&
      npm ci --prefix "$stage" --no-audit --no-fund --loglevel=error
  }
  install_into "$SUITE_DIR" npm_suite
fi
say "suite @modelcontextprotocol/conformance@$("$NODE" -p "require(process.argv[1]).version" "$SUITE_DIR/node_modules/@modelcontextprotocol/conformance/package.json")"

EVERYTHING="$CACHE/everything-server-$GO_SDK_VERSION/everything-server"
if [ ! -x "$EVERYTHING" ]; then
  say "building $EVERYTHING_PKG@$GO_SDK_VERSION"
  go_everything() { GOBIN="$stage" go install "$EVERYTHING_PKG@$GO_SDK_VERSION"; }
  install_into "$(dirname "$EVERYTHING")" go_everything
fi

say "building mcpgw from $ROOT"
(cd "$ROOT" && go build -o "$tmp/mcpgw" ./cmd/mcpgw)
MCPGW="$tmp/mcpgw"
say "tools ready in $((SECONDS - t0))s"

OUT=${CONFORMANCE_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/mcpgw-conformance-results.XXXXXX")}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
case "$OUT$EVERYTHING" in *[\"\\\|\&]* | *$'\n'*) die "paths with \", \\, |, & or a newline are not supported: $OUT, $EVERYTHING" ;; esac
say "results in $OUT"
"$NODE" "$CLI" list --server >"$OUT/scenarios.txt"
if [ -n "$scenario" ] && ! grep -Eq "^ *- $scenario( |\$)" "$OUT/scenarios.txt"; then
  die "no scenario $scenario; the scenarios are in $OUT/scenarios.txt"
fi

# --- helpers for one run ----------------------------------------------------------
free_port() {
  "$NODE" -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })'
}

# wait_port PORT PID: waits until something accepts on 127.0.0.1:PORT, as
# long as PID lives.
wait_port() {
  for _ in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# start_everything_http DIR: starts the reference server over HTTP on a free
# loopback port and sets upstream_port.
start_everything_http() {
  local port pid
  for _ in 1 2 3; do
    port=$(free_port)
    "$EVERYTHING" -http="127.0.0.1:$port" -stateless=false >>"$1/everything-server.log" 2>&1 &
    pid=$!
    started+=("$pid")
    if wait_port "$port" "$pid"; then
      upstream_port=$port
      return 0
    fi
    stop_started # another process took the port first, or it failed
  done
  tail -20 "$1/everything-server.log" >&2
  die "the everything-server did not start; see $1/everything-server.log"
}

# start_gateway DIR TEMPLATE: fills in the config template, starts mcpgw with
# it, waits for its listening line and for the server "everything" to run,
# and sets gateway_addr.
start_gateway() {
  local dir=$1 template=$2 token hash pid state
  token=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
  hash=$(printf %s "$token" | sha256sum | cut -d' ' -f1)
  mkdir -p "$dir/data"
  sed -e "s|@DATA_DIR@|$dir/data|g" \
    -e "s|@ADMIN_TOKEN_SHA256@|$hash|g" \
    -e "s|@UPSTREAM_PORT@|${upstream_port:-}|g" \
    -e "s|@EVERYTHING_SERVER@|$EVERYTHING|g" \
    "$template" >"$dir/mcpgw.yaml"
  if grep -n '^[^#]*@[A-Z_]*@' "$dir/mcpgw.yaml" >&2; then die "placeholders left in $dir/mcpgw.yaml"; fi
  if ! "$MCPGW" validate --config "$dir/mcpgw.yaml" >"$dir/validate.log" 2>&1; then
    cat "$dir/validate.log" >&2
    die "mcpgw rejects ${template#"$ROOT"/} (filled in: $dir/mcpgw.yaml)"
  fi

  "$MCPGW" serve --config "$dir/mcpgw.yaml" 2>"$dir/mcpgw.log" &
  pid=$!
  started+=("$pid")
  gateway_addr=""
  for _ in $(seq 1 300); do
    gateway_addr=$(sed -n 's/.*"msg":"listening".*"addr":"\([^"]*\)".*/\1/p' "$dir/mcpgw.log" | head -1)
    [ -z "$gateway_addr" ] || break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$gateway_addr" ]; then
    tail -20 "$dir/mcpgw.log" >&2
    die "mcpgw did not start listening; see $dir/mcpgw.log"
  fi

  # The servers start in the background: wait for ours to be running.
  # shellcheck disable=SC2016 # JavaScript, not shell
  if ! state=$(MCPGW_ADMIN_TOKEN=$token "$NODE" -e '
    const url = process.argv[1], deadline = Date.now() + 60000;
    const headers = { authorization: `Bearer ${process.env.MCPGW_ADMIN_TOKEN}` };
    (async () => {
      let last = "no answer";
      while (Date.now() < deadline) {
        try {
          const res = await fetch(url, { headers });
          last = await res.text();
          if (res.ok && JSON.parse(last).state === "running") { console.log(last); return; }
        } catch (err) { last = String(err); }
        await new Promise((r) => setTimeout(r, 200));
      }
      console.log(last);
      process.exitCode = 1;
    })();' "http://$gateway_addr/admin/servers/everything"); then
    tail -20 "$dir/mcpgw.log" >&2
    die "the server everything did not reach state running in mcpgw within 60s: $state"
  fi
  printf '%s\n' "$state" >"$dir/upstream-status.json"
  # mcpgw's stdio server must go when mcpgw goes; stop_started checks.
  # (Never pid 0 or 1: kill 0 would signal this script's own group.)
  pid=$(sed -n 's/.*"transport":"stdio".*"pid":\([0-9][0-9]*\).*/\1/p' "$dir/upstream-status.json")
  if [ -n "$pid" ] && [ "$pid" -gt 1 ]; then watched+=("$pid"); fi
}

# run_suite URL DIR: runs the suite against URL; results go to DIR.
run_suite() {
  local url=$1 dir=$2 rc=0 args
  [[ $url =~ ^http://(127\.[0-9]+\.[0-9]+\.[0-9]+|localhost|\[::1\]):[0-9]+/ ]] ||
    die "refusing a URL that is not on loopback: $url"
  if [ -n "$scenario" ]; then args=(--scenario "$scenario"); else args=(--suite active); fi
  say "suite against $url"
  # In the background, so that a signal to this script is handled at once
  # (bash runs traps only between foreground commands); timeout passes the
  # SIGTERM of stop_pid on to the suite.
  (cd "$dir" && exec timeout "$SUITE_TIMEOUT" "$NODE" "$CLI" server --url "$url" "${args[@]}" -o "$dir/results") \
    >"$dir/conformance.log" 2>&1 &
  started+=("$!")
  wait "$!" || rc=$?
  unset 'started[-1]' # it has ended: nothing to stop
  # 0: all passed, 1: some check failed; anything else is the CLI's own trouble.
  case $rc in
    0 | 1) ;;
    124) say "warning: the suite did not finish within ${SUITE_TIMEOUT}s; unfinished scenarios count as failed" ;;
    *) say "warning: the suite exited with status $rc; see $dir/conformance.log" ;;
  esac
}

summaries=()
status=0

# baseline ID TITLE: a run of the suite against the reference server over HTTP.
baseline() {
  local dir="$OUT/$1" title=$2 t=$SECONDS
  mkdir -p "$dir"
  echo
  say "== $title"
  say "   results: $dir"
  start_everything_http "$dir"
  run_suite "http://127.0.0.1:$upstream_port/" "$dir"
  stop_started
  report baseline "conformance ($title)" "$dir" "$OUT/scenarios.txt"
  say "   took $((SECONDS - t))s"
}

# gateway ID TITLE KIND BASELINE-ID: a run of the suite through mcpgw in
# front of the reference server over KIND (http or stdio), compared with the
# run BASELINE-ID.
gateway() {
  local dir="$OUT/$1" title=$2 kind=$3 base="$OUT/$4" t=$SECONDS
  mkdir -p "$dir"
  echo
  say "== $title: mcpgw in front of the reference server over $kind"
  say "   results: $dir"
  upstream_port=""
  if [ "$kind" = http ]; then start_everything_http "$dir"; fi
  start_gateway "$dir" "$CONF_DIR/gateway-$kind.yaml"
  run_suite "http://$gateway_addr/mcp" "$dir"
  stop_started
  report compare "conformance ($title)" "$kind" "$base" "$dir" "$EXPECTED" "$OUT/scenarios.txt"
  say "   mcpgw's log: $dir/mcpgw.log"
  say "   took $((SECONDS - t))s"
}

# report ARGS...: runs report.cjs, keeps its last summary line, and notes a
# failure in status.
report() {
  local rc=0
  (cd "$ROOT" && "$NODE" "$CONF_DIR/report.cjs" "$@") | tee "$tmp/report.out" || rc=$?
  summaries+=("$(grep '^conformance (' "$tmp/report.out" | tail -1 || true)")
  [ "$rc" -eq 0 ] || status=1
}

if [ "$only" != stdio ]; then
  baseline a-baseline-http "baseline A, reference server over HTTP"
  gateway b-gateway-http "http upstream" http a-baseline-http
fi
if [ "$only" != http ]; then
  baseline c-baseline-stdio-standin "baseline B, reference server over HTTP standing in for stdio"
  gateway d-gateway-stdio "stdio upstream" stdio c-baseline-stdio-standin
fi

echo
say "== summary (results in $OUT, took $((SECONDS - t0))s in all)"
printf '%s\n' "${summaries[@]}" | tee "$OUT/summary.txt"
if [ "$status" -ne 0 ]; then
  say "FAILED: see the errors above; conformance/README.md explains them"
fi
exit "$status"

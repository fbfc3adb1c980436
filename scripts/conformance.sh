#!/usr/bin/env bash
# conformance.sh: runs the official MCP conformance suite
# (npm @modelcontextprotocol/conformance) through mcpgw and compares the
# results, scenario by scenario, with the reference server's own.
#
# Usage: scripts/conformance.sh [--suite 2025|2026|all] [--only RUNS]
#                               [--scenario NAME] [--help]
#
# The reference server is the Go SDK's conformance everything-server. Every
# run is against processes started for that run alone.
#
# Suite 2025: @modelcontextprotocol/conformance 0.1.16 (conformance/), its
# "active" scenarios, which the reference server passes all of:
#   (a) baseline A      the everything-server over streamable HTTP, directly
#   (b) http upstream   mcpgw in front of the everything-server over HTTP;
#                       compared with (a)
#   (c) baseline B      the stand-in for the stdio case: the suite speaks only
#                       HTTP, so the server's stdio mode cannot be tested
#                       directly; the same binary over HTTP stands in for it
#   (d) stdio upstream  mcpgw in front of the same binary as a stdio child;
#                       compared with (c)
# Suite 2026: @modelcontextprotocol/conformance 0.2.0-alpha.12
# (conformance/2026/) with --requirements 2026-07-28: the scenarios that
# revision requires, at the 2026-07-28 wire. Only those are scored; the
# extension and pending scenarios the CLI runs with them are shown, not
# judged.
#   (e) 2026 baseline   the everything-server over HTTP, -stateless=true
#   (f) modern-http     mcpgw in front of it over HTTP (-stateless=true)
#   (g) modern-legacy-http  mcpgw in front of the everything-server over
#                       HTTP with -stateless=false, which speaks only the
#                       2025 era to mcpgw
#   (h) modern-stdio    mcpgw in front of it as a stdio child
#                       (f), (g) and (h) are compared with (e)
#   (i) client baseline the suite's client scenarios initialize, tools_call,
#                       request-metadata and http-standard-headers against
#                       the Go SDK's everything-client
#   (j) client          the same scenarios with mcpgw as the client: the
#                       scenario's fake server is mcpgw's one upstream, and
#                       conformance/client-via-mcpgw.sh drives a tool call
#                       through mcpgw; compared with (i)
#   (n) client-auth baseline  the suite's auth/* client scenarios that the
#                       Go SDK's everything-client implements, against it
#   (o) client-auth     the same with mcpgw as the OAuth client
#                       (2026/gateway-client-oauth.yaml; the driver opens
#                       the connect URLs mcpgw answers with, as the user);
#                       compared with (n); auth/client-credentials-basic,
#                       which the everything-client lacks, is judged on
#                       mcpgw's result alone
# The tasks extension (io.modelcontextprotocol/tasks): the suite's tasks-*
# scenarios, each run alone at the 2026-07-28 wire (--force), all judged,
# against e2e/fixtures/taskextserver, a test server with their tools:
#   (k) tasks baseline  the test server with -tasks (it offers the extension
#                       itself), directly
#   (l) tasks-hosted    mcpgw in front of the test server without -tasks (its
#                       calls run to their end): mcpgw makes them tasks;
#                       compared with (k)
#   (m) tasks-relay     mcpgw in front of the test server with -tasks: mcpgw
#                       relays its tasks; compared with (k)
# A scenario that passes on the baseline must pass through mcpgw unless it is
# in the run's list in conformance/expected-failures.yaml; a listed scenario
# that passes is an error too (remove it from the list). conformance/README.md
# explains the output and the lists.
#
# Options:
#   --suite 2025|2026|all  which suites to run (default all)
#   --only RUNS         only these runs, comma-separated, each with its
#                       baseline: http, stdio (2025); modern-http,
#                       modern-legacy-http, modern-stdio, client,
#                       client-auth, tasks-hosted, tasks-relay (2026)
#   --scenario NAME     run one scenario instead of the whole set, in each
#                       selected run that has it (names: see
#                       "conformance list" in the README)
#   -h, --help          print this help
#
# Environment:
#   MCPGW_CONFORMANCE_CACHE  where the tools are installed and kept between
#                            runs; default ${XDG_CACHE_HOME:-$HOME/.cache}/mcpgw-conformance
#   CONFORMANCE_OUT          folder for the results (kept); default a new
#                            temporary folder. Each run gets a subfolder with
#                            conformance.log, results/*/checks.json, the
#                            servers' logs and, for the gateway runs, the
#                            filled-in mcpgw.yaml and mcpgw's own log (mcpgw.log).
#
# Needs go, node and npm (Node 20 is enough: if node is older than 22, the
# suites' Node 22 is installed from npm, package "node", into the cache).
# Installs, all pinned: node@22.23.3 (only then), the suites from
# conformance/package-lock.json and conformance/2026/package-lock.json, and
# everything-server and everything-client from the Go SDK at v1.8.0; mcpgw,
# conformance/driver and e2e/fixtures/taskextserver are built from this tree
# on every run. Every Node
# process gets conformance/loopback-listen.cjs preloaded, so none listens
# beyond 127.0.0.1, and the suites only ever target loopback URLs.
#
# Exit status: 0 if every run matches its baseline and the list, 1 on a
# regression, a listed scenario that passes or a failing baseline, 2 if
# the tools could not be installed or a server did not start.

# shellcheck disable=SC2317 # cleanup and the install steps run through trap and install_into
set -euo pipefail

readonly GO_SDK_VERSION=v1.8.0
readonly EVERYTHING_PKG=github.com/modelcontextprotocol/go-sdk/conformance/everything-server
readonly EVERYTHING_CLIENT_PKG=github.com/modelcontextprotocol/go-sdk/conformance/everything-client
readonly NODE_VERSION=22.23.3 # used only when the machine's node is older than 22
readonly SUITE_TIMEOUT=300    # seconds for one run of the suite
readonly REQUIREMENTS=2026-07-28
# The client scenarios of suite 2026 that run with mcpgw as the client.
readonly CLIENT_SCENARIOS=(initialize tools_call request-metadata http-standard-headers)
# The auth/* client scenarios that run with mcpgw as the OAuth client, all
# of those the Go SDK's everything-client (the baseline) implements ...
readonly CLIENT_AUTH_SCENARIOS=(
  auth/metadata-default auth/metadata-var1 auth/metadata-var2 auth/metadata-var3
  auth/basic-cimd auth/pre-registration
  auth/scope-from-www-authenticate auth/scope-from-scopes-supported
  auth/scope-omitted-when-undefined auth/scope-step-up auth/scope-retry-limit
  auth/token-endpoint-auth-basic auth/token-endpoint-auth-post auth/token-endpoint-auth-none
  auth/2025-03-26-oauth-metadata-backcompat auth/2025-03-26-oauth-endpoint-fallback
  auth/resource-mismatch auth/offline-access-scope auth/offline-access-not-supported
  auth/authorization-server-migration
  auth/iss-supported auth/iss-not-advertised auth/iss-supported-missing
  auth/iss-wrong-issuer auth/iss-unexpected auth/iss-normalized auth/metadata-issuer-mismatch
)
# ... and those it does not, judged on mcpgw's result alone. Not run: the
# extensions mcpgw has no feature for (auth/client-credentials-jwt:
# private_key_jwt; auth/dpop, auth/dpop-nonce: DPoP;
# auth/enterprise-managed-authorization: ID-JAG token exchange;
# auth/wif-jwt-bearer: the JWT-bearer grant).
readonly CLIENT_AUTH_ALONE=(auth/client-credentials-basic)
readonly CLIENT_TIMEOUT=120 # seconds for one client scenario, the suite's own 60s included

ROOT=$(cd "$(dirname "$0")/.." && pwd)
readonly ROOT
readonly CONF_DIR="$ROOT/conformance"
readonly EXPECTED="$CONF_DIR/expected-failures.yaml"
CACHE=${MCPGW_CONFORMANCE_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/mcpgw-conformance}

say() { printf 'conformance: %s\n' "$*"; }
die() { printf 'conformance: error: %s\n' "$*" >&2; exit 2; }

suite=all
only=""
scenario=""
while [ $# -gt 0 ]; do
  case "$1" in
    --suite) suite=${2:-}; shift 2 || die "--suite needs 2025, 2026 or all" ;;
    --only) only=${2:-}; shift 2 || die "--only needs a run name" ;;
    --scenario) scenario=${2:-}; shift 2 || die "--scenario needs a name" ;;
    -h | --help) sed -n '2,/^$/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
case "$suite" in 2025 | 2026 | all) ;; *) die "--suite takes 2025, 2026 or all" ;; esac
[ -z "$scenario" ] || [[ $scenario =~ ^[a-z0-9_-]+(/[a-z0-9_-]+)?$ ]] || die "bad scenario name $scenario"

# runs: the gateway runs to do, each with its baseline.
runs_2025=(http stdio)
runs_2026=(modern-http modern-legacy-http modern-stdio client client-auth tasks-hosted tasks-relay)
runs=()
if [ -n "$only" ]; then
  IFS=, read -r -a wanted <<<"$only"
  [ "${#wanted[@]}" -gt 0 ] || die "--only needs a run name"
  for r in "${wanted[@]}"; do
    if [[ " ${runs_2025[*]} " == *" $r "* ]]; then
      [ "$suite" != 2026 ] || die "--only $r is a run of suite 2025, not of --suite 2026"
    elif [[ " ${runs_2026[*]} " == *" $r "* ]]; then
      [ "$suite" != 2025 ] || die "--only $r is a run of suite 2026, not of --suite 2025"
    else
      die "--only takes ${runs_2025[*]} ${runs_2026[*]} (comma-separated), not $r"
    fi
    runs+=("$r")
  done
else
  [ "$suite" = 2026 ] || runs+=("${runs_2025[@]}")
  [ "$suite" = 2025 ] || runs+=("${runs_2026[@]}")
fi
wants() { [[ " ${runs[*]} " == *" $1 "* ]]; }
wants_2025() { wants http || wants stdio; }
wants_2026_server() { wants modern-http || wants modern-legacy-http || wants modern-stdio; }
wants_tasks() { wants tasks-hosted || wants tasks-relay; }
wants_clients() { wants client || wants client-auth; }
wants_2026() { wants_2026_server || wants_clients || wants_tasks; }

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

# The judge first: report.cjs's own tests.
if ! "$NODE" --test "$CONF_DIR/report.test.cjs" >"$tmp/report-test.log" 2>&1; then
  cat "$tmp/report-test.log" >&2
  die "conformance/report.cjs fails its tests (conformance/report.test.cjs)"
fi

# install_suite DIR: installs the suite pinned by DIR/package-lock.json into
# the cache (a folder named after the lock's hash, so a new lock installs
# anew) and prints the path of its CLI.
install_suite() {
  local src=$1 lock_sum dir
  lock_sum=$(sha256sum "$src/package-lock.json" | cut -c1-12)
  dir="$CACHE/suite-$lock_sum"
  if [ ! -f "$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js" ]; then
    say "installing the conformance suite (${src#"$ROOT"/}/package-lock.json) into $dir" >&2
    npm_suite() {
      cp "$src/package.json" "$src/package-lock.json" "$stage/" &&
        npm ci --prefix "$stage" --no-audit --no-fund --loglevel=error >&2
    }
    install_into "$dir" npm_suite
  fi
  say "suite @modelcontextprotocol/conformance@$("$NODE" -p "require(process.argv[1]).version" "$dir/node_modules/@modelcontextprotocol/conformance/package.json")" >&2
  printf '%s\n' "$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js"
}

CLI="" CLI26=""
if wants_2025; then CLI=$(install_suite "$CONF_DIR"); fi
if wants_2026; then CLI26=$(install_suite "$CONF_DIR/2026"); fi

EVERYTHING="$CACHE/everything-server-$GO_SDK_VERSION/everything-server"
if [ ! -x "$EVERYTHING" ]; then
  say "building $EVERYTHING_PKG@$GO_SDK_VERSION"
  go_everything() { GOBIN="$stage" go install "$EVERYTHING_PKG@$GO_SDK_VERSION"; }
  install_into "$(dirname "$EVERYTHING")" go_everything
fi
EVERYTHING_CLIENT="$CACHE/everything-client-$GO_SDK_VERSION/everything-client"
if wants_clients && [ ! -x "$EVERYTHING_CLIENT" ]; then
  say "building $EVERYTHING_CLIENT_PKG@$GO_SDK_VERSION"
  go_everything_client() { GOBIN="$stage" go install "$EVERYTHING_CLIENT_PKG@$GO_SDK_VERSION"; }
  install_into "$(dirname "$EVERYTHING_CLIENT")" go_everything_client
fi

say "building mcpgw from $ROOT"
(cd "$ROOT" && go build -o "$tmp/mcpgw" ./cmd/mcpgw)
MCPGW="$tmp/mcpgw"
if wants_clients; then (cd "$ROOT" && go build -o "$tmp/driver" ./conformance/driver); fi
TASKEXT="$tmp/taskextserver"
if wants_tasks; then (cd "$ROOT" && go build -o "$TASKEXT" ./e2e/fixtures/taskextserver); fi

say "tools ready in $((SECONDS - t0))s"

OUT=${CONFORMANCE_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/mcpgw-conformance-results.XXXXXX")}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
case "$OUT$EVERYTHING" in *[\"\\\|\&]* | *$'\n'*) die "paths with \", \\, |, & or a newline are not supported: $OUT, $EVERYTHING" ;; esac
# The suite runs the client command through a shell, split at spaces.
if wants_clients; then
  case "$CONF_DIR$OUT$tmp" in *[!A-Za-z0-9/._+-]*) die "for the client runs, the paths may hold only letters, digits and / . _ + -: $CONF_DIR, $OUT, $tmp" ;; esac
fi
say "results in $OUT"

# The scenario names of each suite, for the lists and --scenario.
if [ -n "$CLI" ]; then "$NODE" "$CLI" list --server >"$OUT/scenarios.txt"; fi
if [ -n "$CLI26" ]; then
  "$NODE" "$CLI26" list --server >"$OUT/scenarios-2026.txt"
  "$NODE" "$CLI26" list --server --requirements "$REQUIREMENTS" >"$OUT/required-2026.txt"
  "$NODE" "$CLI26" list --client >"$OUT/client-scenarios-2026.txt"
  # The tasks legs judge the tasks extension's scenarios, in the shape
  # report.cjs reads a requirement list in.
  {
    echo "Server scenarios (the tasks extension, io.modelcontextprotocol/tasks):"
    grep -E '^ *- tasks-' "$OUT/scenarios-2026.txt" | sed 's/ \[.*//'
  } >"$OUT/tasks-2026.txt"
  mapfile -t TASK_SCENARIOS < <(sed -n 's/^ *- \(tasks-[a-z0-9-]*\).*/\1/p' "$OUT/tasks-2026.txt")
  if wants_tasks && [ "${#TASK_SCENARIOS[@]}" -eq 0 ]; then die "the suite lists no tasks-* scenario"; fi
fi
has_scenario() { grep -Eq "^ *- $scenario( |\$)" "$1"; }
if [ -n "$scenario" ]; then
  kept=()
  for r in "${runs[@]}"; do
    case $r in
      http | stdio) f=scenarios.txt ;;
      client | client-auth) f=client-scenarios-2026.txt ;;
      tasks-*) f=tasks-2026.txt ;;
      *) f=scenarios-2026.txt ;;
    esac
    if has_scenario "$OUT/$f" && case $r in
      client) [[ " ${CLIENT_SCENARIOS[*]} " == *" $scenario "* ]] ;;
      client-auth) [[ " ${CLIENT_AUTH_SCENARIOS[*]} ${CLIENT_AUTH_ALONE[*]} " == *" $scenario "* ]] ;;
    esac; then
      kept+=("$r")
    else
      say "run $r has no scenario $scenario: skipping it"
    fi
  done
  [ "${#kept[@]}" -gt 0 ] || die "no selected run has a scenario $scenario; the names are in $OUT/*scenarios*.txt (client: ${CLIENT_SCENARIOS[*]}; client-auth: ${CLIENT_AUTH_SCENARIOS[*]} ${CLIENT_AUTH_ALONE[*]})"
  runs=("${kept[@]}")
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

# start_everything_http DIR STATELESS: starts the reference server over HTTP
# (-stateless=STATELESS) on a free loopback port and sets upstream_port.
start_everything_http() {
  local port pid
  for _ in 1 2 3; do
    port=$(free_port)
    "$EVERYTHING" -http="127.0.0.1:$port" -stateless="$2" >>"$1/everything-server.log" 2>&1 &
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

# start_taskext DIR FLAGS...: starts e2e/fixtures/taskextserver with FLAGS on
# a free loopback port and sets upstream_port.
start_taskext() {
  local dir=$1 pid port
  shift
  : >"$dir/taskextserver.log"
  "$TASKEXT" -addr 127.0.0.1:0 "$@" 2>>"$dir/taskextserver.log" &
  pid=$!
  started+=("$pid")
  for _ in $(seq 1 100); do
    port=$(sed -n 's#^listening on http://127\.0\.0\.1:\([0-9][0-9]*\)/mcp$#\1#p' "$dir/taskextserver.log")
    [ -z "$port" ] || break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$port" ] || die "the tasks test server did not start; see $dir/taskextserver.log"
  upstream_port=$port
}

# start_gateway DIR TEMPLATE [SERVER]: fills in the config template, starts
# mcpgw with it, waits for its listening line and for the server SERVER
# (default "everything") to run, and sets gateway_addr.
start_gateway() {
  local dir=$1 template=$2 server=${3:-everything} token hash pid state
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

  : >"$dir/mcpgw.log" # before mcpgw starts: reading it must not race its creation
  "$MCPGW" serve --config "$dir/mcpgw.yaml" 2>>"$dir/mcpgw.log" &
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
  if ! state=$(MCPGW_ADMIN_TOKEN=$token "$NODE" "$CONF_DIR/wait-running.cjs" "http://$gateway_addr/admin/servers/$server" 60); then
    tail -20 "$dir/mcpgw.log" >&2
    die "the server $server did not reach state running in mcpgw within 60s: $state"
  fi
  printf '%s\n' "$state" >"$dir/upstream-status.json"
  # mcpgw's stdio server must go when mcpgw goes; stop_started checks.
  # (Never pid 0 or 1: kill 0 would signal this script's own group.)
  pid=$(sed -n 's/.*"transport":"stdio".*"pid":\([0-9][0-9]*\).*/\1/p' "$dir/upstream-status.json")
  if [ -n "$pid" ] && [ "$pid" -gt 1 ]; then watched+=("$pid"); fi
}

# run_suite URL DIR SUITE: runs the suite SUITE (2025 or 2026) against URL;
# results go to DIR.
run_suite() {
  local url=$1 dir=$2 cli=$CLI rc=0 args
  [[ $url =~ ^http://(127\.[0-9]+\.[0-9]+\.[0-9]+|localhost|\[::1\]):[0-9]+/ ]] ||
    die "refusing a URL that is not on loopback: $url"
  if [ "$3" = 2026 ]; then
    cli=$CLI26
    # --requirements runs every scenario at the revision's wire (forced);
    # one scenario runs the same way with these options.
    if [ -n "$scenario" ]; then args=(--scenario "$scenario" --spec-version "$REQUIREMENTS" --force); else args=(--requirements "$REQUIREMENTS"); fi
  elif [ -n "$scenario" ]; then
    args=(--scenario "$scenario")
  else
    args=(--suite active)
  fi
  say "suite against $url"
  # In the background, so that a signal to this script is handled at once
  # (bash runs traps only between foreground commands); timeout passes the
  # SIGTERM of stop_pid on to the suite.
  (cd "$dir" && exec timeout "$SUITE_TIMEOUT" "$NODE" "$cli" server --url "$url" "${args[@]}" -o "$dir/results") \
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

# run_tasks URL DIR: runs the tasks-* scenarios (or the one --scenario
# names) against URL, each alone at the 2026-07-28 wire; results go to DIR.
run_tasks() {
  local url=$1 dir=$2 s rc
  local todo=("${TASK_SCENARIOS[@]}")
  [ -z "$scenario" ] || todo=("$scenario")
  [[ $url =~ ^http://(127\.[0-9]+\.[0-9]+\.[0-9]+|localhost|\[::1\]):[0-9]+/ ]] ||
    die "refusing a URL that is not on loopback: $url"
  say "tasks scenarios against $url"
  for s in "${todo[@]}"; do
    rc=0
    (cd "$dir" && exec timeout "$SUITE_TIMEOUT" "$NODE" "$CLI26" server --url "$url" --scenario "$s" --spec-version "$REQUIREMENTS" --force -o "$dir/results") \
      >>"$dir/conformance.log" 2>&1 &
    started+=("$!")
    wait "$!" || rc=$?
    unset 'started[-1]'
    case $rc in
      0 | 1) ;;
      124) say "warning: scenario $s did not finish within ${SUITE_TIMEOUT}s; it counts as failed" ;;
      *) say "warning: the suite exited with status $rc on $s; see $dir/conformance.log" ;;
    esac
  done
}

# tasks_baseline ID: the tasks scenarios against the test server with -tasks.
tasks_baseline() {
  local dir="$OUT/$1" t=$SECONDS
  mkdir -p "$dir"
  echo
  say "== tasks baseline: the tasks test server with the extension, directly"
  say "   results: $dir"
  start_taskext "$dir" -tasks
  run_tasks "http://127.0.0.1:$upstream_port/mcp" "$dir"
  stop_started
  report baseline "conformance (tasks baseline, taskextserver -tasks)" "$dir" "$OUT/scenarios-2026.txt" "$OUT/tasks-2026.txt"
  say "   took $((SECONDS - t))s"
}

# tasks_gateway ID TITLE BASELINE-ID LIST FLAGS...: the tasks scenarios
# through mcpgw (conformance/2026/gateway-tasks.yaml) in front of the test
# server started with FLAGS, compared with BASELINE-ID using the list LIST.
tasks_gateway() {
  local dir="$OUT/$1" title=$2 base="$OUT/$3" list=$4 t=$SECONDS
  shift 4
  mkdir -p "$dir"
  echo
  say "== $title: mcpgw in front of the tasks test server (${*:-no flags})"
  say "   results: $dir"
  start_taskext "$dir" "$@"
  start_gateway "$dir" "$CONF_DIR/2026/gateway-tasks.yaml" tasks
  run_tasks "http://$gateway_addr/mcp" "$dir"
  stop_started
  report compare "conformance ($title)" "$list" "$base" "$dir" "$EXPECTED" "$OUT/scenarios-2026.txt" "$OUT/tasks-2026.txt"
  say "   mcpgw's log: $dir/mcpgw.log"
  say "   took $((SECONDS - t))s"
}

summaries=()
status=0

# suite_files SUITE: sets known (the suite's scenario names) and scored (the
# requirement set to judge, or nothing: judge all that ran).
suite_files() {
  if [ "$1" = 2026 ]; then
    known="$OUT/scenarios-2026.txt"
    scored="$OUT/required-2026.txt"
    [ -z "$scenario" ] || scored=""
  else
    known="$OUT/scenarios.txt"
    scored=""
  fi
}

# baseline ID TITLE SUITE STATELESS: a run of the suite SUITE against the
# reference server over HTTP (-stateless=STATELESS).
baseline() {
  local dir="$OUT/$1" title=$2 t=$SECONDS known scored
  mkdir -p "$dir"
  echo
  say "== $title"
  say "   results: $dir"
  start_everything_http "$dir" "$4"
  run_suite "http://127.0.0.1:$upstream_port/" "$dir" "$3"
  stop_started
  suite_files "$3"
  report baseline "conformance ($title)" "$dir" "$known" ${scored:+"$scored"}
  say "   took $((SECONDS - t))s"
}

# gateway ID TITLE KIND BASELINE-ID SUITE LIST TEMPLATE STATELESS: a run of
# the suite SUITE through mcpgw (config TEMPLATE) in front of the reference
# server over KIND (http, with -stateless=STATELESS, or stdio), compared
# with the run BASELINE-ID using the list LIST of expected-failures.yaml.
gateway() {
  local dir="$OUT/$1" title=$2 kind=$3 base="$OUT/$4" t=$SECONDS known scored over=$3
  mkdir -p "$dir"
  [ "$kind" = stdio ] || [ "$5" = 2025 ] || over="http, -stateless=$8"
  echo
  say "== $title: mcpgw in front of the reference server over $over"
  say "   results: $dir"
  upstream_port=""
  if [ "$kind" = http ]; then start_everything_http "$dir" "$8"; fi
  start_gateway "$dir" "$7"
  run_suite "http://$gateway_addr/mcp" "$dir" "$5"
  stop_started
  suite_files "$5"
  report compare "conformance ($title)" "$6" "$base" "$dir" "$EXPECTED" "$known" ${scored:+"$scored"}
  say "   mcpgw's log: $dir/mcpgw.log"
  say "   took $((SECONDS - t))s"
}

# run_client DIR SCENARIO COMMAND: runs the client scenario SCENARIO of suite
# 2026 with COMMAND as the client; results go to DIR.
run_client() {
  local dir=$1 rc=0
  say "client scenario $2"
  (cd "$dir" && exec timeout "$CLIENT_TIMEOUT" "$NODE" "$CLI26" client --command "$3" --scenario "$2" --timeout 60000 -o "$dir/results") \
    >>"$dir/conformance.log" 2>&1 &
  started+=("$!")
  wait "$!" || rc=$?
  unset 'started[-1]'
  case $rc in
    0 | 1) ;;
    124) say "warning: client scenario $2 did not finish within ${CLIENT_TIMEOUT}s" ;;
    *) say "warning: the suite exited with status $rc; see $dir/conformance.log" ;;
  esac
}

# clients BASE-ID ID LIST TEMPLATE WHAT: the client scenarios named by the
# arrays todo (with a baseline) and alone (without), against the Go SDK's
# everything-client (BASE-ID), then with mcpgw as the client (ID, config
# template TEMPLATE), compared using the list LIST of expected-failures.yaml.
# WHAT names the scenarios in the titles.
clients() {
  local base="$OUT/$1" dir="$OUT/$2" list=$3 template=$4 what=$5 t=$SECONDS s pid
  mkdir -p "$base" "$dir"
  : >>"$base/conformance.log" # read by the report even when only alone ran
  if [ "${#todo[@]}" -gt 0 ]; then
    echo
    say "== $list baseline: the suite's $what against the Go SDK's everything-client"
    say "   results: $base"
    for s in "${todo[@]}"; do run_client "$base" "$s" "$EVERYTHING_CLIENT"; done
    report client-baseline "conformance ($list baseline, the Go SDK's everything-client)" "$base" "$OUT/client-scenarios-2026.txt" "${todo[@]}"
  fi
  echo
  say "== $list: the same $what with mcpgw as the client (conformance/client-via-mcpgw.sh)"
  say "   results: $dir"
  for s in ${todo[@]+"${todo[@]}"} ${alone[@]+"${alone[@]}"}; do
    CONFORMANCE_MCPGW=$MCPGW CONFORMANCE_DRIVER="$tmp/driver" CONFORMANCE_NODE=$NODE \
      CONFORMANCE_TEMPLATE="$template" CONFORMANCE_CLIENT_OUT="$dir/mcpgw" \
      run_client "$dir" "$s" "$CONF_DIR/client-via-mcpgw.sh"
    # The wrapper stops its mcpgw; if the suite killed the wrapper first,
    # mcpgw may be left: stop it. (Never pid 0 or 1.)
    pid=$(cat "$dir/mcpgw/$s/mcpgw.pid" 2>/dev/null || true)
    if [[ $pid =~ ^[0-9]+$ ]] && [ "$pid" -gt 1 ] && kill -0 "$pid" 2>/dev/null; then
      say "warning: mcpgw (pid $pid) outlived client scenario $s; stopping it"
      stop_pid "$pid"
    fi
  done
  report client "conformance ($list: mcpgw as the client)" "$list" "$base" "$dir" "$EXPECTED" "$OUT/client-scenarios-2026.txt" \
    ${todo[@]+"${todo[@]}"} -- ${alone[@]+"${alone[@]}"}
  say "   each scenario's mcpgw.yaml and mcpgw.log: $dir/mcpgw/<scenario>/"
  say "   took $((SECONDS - t))s"
}

# pick SCENARIOS... -- ALONE...: sets todo and alone to the arrays given,
# or, with --scenario, to the one scenario in whichever it is.
pick() {
  local cut
  todo=() alone=()
  for ((cut = 1; cut <= $#; cut++)); do [ "${!cut}" != -- ] || break; done
  todo=("${@:1:cut-1}")
  alone=("${@:cut+1}")
  [ -n "$scenario" ] || return 0
  if [[ " ${todo[*]} " == *" $scenario "* ]]; then todo=("$scenario") alone=(); else todo=() alone=("$scenario"); fi
}

# report ARGS...: runs report.cjs, keeps its last summary line, and notes a
# failure in status.
report() {
  local rc=0
  (cd "$ROOT" && "$NODE" "$CONF_DIR/report.cjs" "$@") | tee "$tmp/report.out" || rc=$?
  summaries+=("$(grep '^conformance (' "$tmp/report.out" | tail -1 || true)")
  [ "$rc" -eq 0 ] || status=1
}

if wants http; then
  baseline a-baseline-http "baseline A, reference server over HTTP" 2025 false
  gateway b-gateway-http "http upstream" http a-baseline-http 2025 http "$CONF_DIR/gateway-http.yaml" false
fi
if wants stdio; then
  baseline c-baseline-stdio-standin "baseline B, reference server over HTTP standing in for stdio" 2025 false
  gateway d-gateway-stdio "stdio upstream" stdio c-baseline-stdio-standin 2025 stdio "$CONF_DIR/gateway-stdio.yaml" false
fi
if wants_2026_server; then
  baseline e-baseline-2026 "2026 baseline, reference server over HTTP, stateless" 2026 true
fi
if wants modern-http; then
  gateway f-modern-http modern-http http e-baseline-2026 2026 modern-http "$CONF_DIR/2026/gateway-http.yaml" true
fi
if wants modern-legacy-http; then
  gateway g-modern-legacy-http modern-legacy-http http e-baseline-2026 2026 modern-legacy-http "$CONF_DIR/2026/gateway-http.yaml" false
fi
if wants modern-stdio; then
  gateway h-modern-stdio modern-stdio stdio e-baseline-2026 2026 modern-stdio "$CONF_DIR/2026/gateway-stdio.yaml" true
fi
if wants client; then
  pick "${CLIENT_SCENARIOS[@]}" --
  clients i-client-baseline j-client client "$CONF_DIR/2026/gateway-client.yaml" "client scenarios"
fi
if wants_tasks; then
  tasks_baseline k-tasks-baseline
fi
if wants tasks-hosted; then
  tasks_gateway l-tasks-hosted tasks-hosted k-tasks-baseline tasks-hosted
fi
if wants tasks-relay; then
  tasks_gateway m-tasks-relay tasks-relay k-tasks-baseline tasks-relay -tasks
fi
if wants client-auth; then
  pick "${CLIENT_AUTH_SCENARIOS[@]}" -- "${CLIENT_AUTH_ALONE[@]}"
  clients n-client-auth-baseline o-client-auth client-auth "$CONF_DIR/2026/gateway-client-oauth.yaml" "auth/* client scenarios"
fi

echo
say "== summary (results in $OUT, took $((SECONDS - t0))s in all)"
printf '%s\n' "${summaries[@]}" | tee "$OUT/summary.txt"
if [ "$status" -ne 0 ]; then
  say "FAILED: see the errors above; conformance/README.md explains them"
fi
exit "$status"

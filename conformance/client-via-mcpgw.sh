#!/usr/bin/env bash
# client-via-mcpgw.sh: the client command of scripts/conformance.sh's client
# scenarios, where mcpgw is the client under test. The suite's CLI runs it as
#   client-via-mcpgw.sh URL
# with MCP_CONFORMANCE_SCENARIO set, after starting the scenario's fake
# server at URL. It writes an mcpgw config whose one HTTP upstream is that
# server (2026/gateway-client.yaml), starts mcpgw on a free loopback port,
# waits for the upstream to be running (admin API), makes mcpgw call the
# scenario's tool with conformance/driver, and stops mcpgw. On a failure it
# prints mcpgw's log (stderr, which the suite keeps in the results folder
# as stderr.txt) and exits 1.
#
# scripts/conformance.sh sets, in the environment:
#   CONFORMANCE_MCPGW     the mcpgw binary
#   CONFORMANCE_DRIVER    the driver binary (conformance/driver)
#   CONFORMANCE_NODE      node, for wait-running.cjs
#   CONFORMANCE_TEMPLATE  the config template to fill in
#   CONFORMANCE_CLIENT_OUT  a folder; each scenario gets a subfolder with
#                         mcpgw.yaml, mcpgw.log, mcpgw.pid and upstream-status.json
set -euo pipefail

say() { printf 'client-via-mcpgw: %s\n' "$*" >&2; }
fail() { say "error: $*"; exit 1; }

[ $# -eq 1 ] || fail "usage: client-via-mcpgw.sh URL (with MCP_CONFORMANCE_SCENARIO set)"
url=$1
scenario=${MCP_CONFORMANCE_SCENARIO:-}
for v in CONFORMANCE_MCPGW CONFORMANCE_DRIVER CONFORMANCE_NODE CONFORMANCE_TEMPLATE CONFORMANCE_CLIENT_OUT; do
  [ -n "${!v:-}" ] || fail "$v is not set: run this through scripts/conformance.sh"
done
# The URL goes into the config through sed and must stay on this machine.
[[ $url =~ ^http://(localhost|127\.0\.0\.1|\[::1\]):[0-9]+(/[A-Za-z0-9._~/-]*)?$ ]] ||
  fail "refusing a server URL that is not a plain loopback http URL: $url"

# What the driver does per scenario: the tool each fake server offers
# (read from the scenario's source in the suite). initialize and
# request-metadata offer none to call; there the driver lists the tools.
driver_args=()
case "$scenario" in
  initialize | request-metadata) ;;
  tools_call) driver_args=(-tool add_numbers -args '{"a":5,"b":3}') ;;
  http-standard-headers) driver_args=(-tool test_headers) ;;
  *) fail "no driver step for scenario \"$scenario\"" ;;
esac

conf_dir=$(cd "$(dirname "$0")" && pwd)
dir="$CONFORMANCE_CLIENT_OUT/$scenario"
rm -rf "$dir"
mkdir -p "$dir/data"

pid=""
stop_mcpgw() {
  local rc=$?
  trap - EXIT
  if [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; then
    for _ in $(seq 1 150); do # up to shutdown_grace (2s) and more
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      say "mcpgw (pid $pid) did not stop within 15s of SIGTERM; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  fi
  if [ "$rc" -ne 0 ] && [ -f "$dir/mcpgw.log" ]; then
    say "mcpgw's log ($dir/mcpgw.log):"
    cat "$dir/mcpgw.log" >&2
  fi
  exit "$rc"
}
trap stop_mcpgw EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

token=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
hash=$(printf %s "$token" | sha256sum | cut -d' ' -f1)
sed -e "s|@DATA_DIR@|$dir/data|g" \
  -e "s|@ADMIN_TOKEN_SHA256@|$hash|g" \
  -e "s|@UPSTREAM_URL@|$url|g" \
  "$CONFORMANCE_TEMPLATE" >"$dir/mcpgw.yaml"
if grep -n '^[^#]*@[A-Z_]*@' "$dir/mcpgw.yaml" >&2; then fail "placeholders left in $dir/mcpgw.yaml"; fi
"$CONFORMANCE_MCPGW" validate --config "$dir/mcpgw.yaml" >&2 || fail "mcpgw rejects $dir/mcpgw.yaml"

# The log exists before mcpgw starts, so that reading it never races its
# creation.
: >"$dir/mcpgw.log"
"$CONFORMANCE_MCPGW" serve --config "$dir/mcpgw.yaml" 2>>"$dir/mcpgw.log" &
pid=$!
printf '%s\n' "$pid" >"$dir/mcpgw.pid"
addr=""
for _ in $(seq 1 150); do
  addr=$(sed -n 's/.*"msg":"listening".*"addr":"\([^"]*\)".*/\1/p' "$dir/mcpgw.log" | head -1)
  [ -z "$addr" ] || break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$addr" ] || fail "mcpgw did not start listening"

# The suite's client scenario ends after 60s: give up on the upstream well
# before, and at once when its start has failed.
rc=0
MCPGW_ADMIN_TOKEN=$token "$CONFORMANCE_NODE" "$conf_dir/wait-running.cjs" \
  "http://$addr/admin/servers/fake" 20 --fail-fast >"$dir/upstream-status.json" || rc=$?
if [ "$rc" -ne 0 ]; then
  cat "$dir/upstream-status.json" >&2
  fail "the upstream fake did not reach state running in mcpgw (see its status above)"
fi

# In the background, so that a SIGTERM reaches the trap at once.
"$CONFORMANCE_DRIVER" -url "http://$addr/mcp" -timeout 20s ${driver_args[@]+"${driver_args[@]}"} &
wait "$!" || fail "the driver failed (scenario $scenario)"

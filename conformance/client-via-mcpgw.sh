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
# The auth/* scenarios (scripts/conformance.sh's client-auth run) protect
# the fake server with an authorization server: the template is then
# 2026/gateway-client-oauth.yaml, whose server gets an oauth block made here
# from the scenario (and from MCP_CONFORMANCE_CONTEXT, which the suite sets
# with pre-registered credentials), and whose public_url is mcpgw's own
# loopback URL, on a port picked before mcpgw starts. The driver then plays
# the user too (-connect): it opens the connect URL mcpgw answers with (the
# authorization server approves at once and sends the browser to mcpgw's
# /oauth/callback) and retries. Scenarios that must be refused (a wrong iss,
# a mismatched resource, ...) end with the driver failing; the suite allows
# that there and judges only what reached its servers.
#
# scripts/conformance.sh sets, in the environment:
#   CONFORMANCE_MCPGW     the mcpgw binary
#   CONFORMANCE_DRIVER    the driver binary (conformance/driver)
#   CONFORMANCE_NODE      node, for wait-running.cjs
#   CONFORMANCE_TEMPLATE  the config template to fill in
#   CONFORMANCE_CLIENT_OUT  a folder; each scenario gets a subfolder with
#                         mcpgw.yaml, mcpgw.log, mcpgw.pid and (but for a
#                         server each user connects to) upstream-status.json
set -euo pipefail

say() { printf 'client-via-mcpgw: %s\n' "$*" >&2; }
fail() { say "error: $*"; exit 1; }

[ $# -eq 1 ] || fail "usage: client-via-mcpgw.sh URL (with MCP_CONFORMANCE_SCENARIO set)"
[[ ${MCP_CONFORMANCE_SCENARIO:-} =~ ^[a-z0-9_-]+(/[a-z0-9_-]+)?$ ]] ||
  fail "MCP_CONFORMANCE_SCENARIO is not a scenario name: ${MCP_CONFORMANCE_SCENARIO:-(unset)}"
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
# For auth/*, oauth says how the server's oauth block is made (see
# oauth_block below): every auth/* fake server offers test-tool.
driver_args=()
timeout=20s
oauth=""
elicit=-elicit-url # the driver declares URL elicitation (auth/* only)
case "$scenario" in
  initialize | request-metadata) ;;
  tools_call) driver_args=(-tool add_numbers -args '{"a":5,"b":3}') ;;
  http-standard-headers) driver_args=(-tool test_headers) ;;
  # No user: mcpgw's own token, so the real tool is there from the start.
  auth/client-credentials-basic) oauth=client-credentials driver_args=(-tool test-tool) ;;
  auth/pre-registration) oauth=pre-registered ;;
  auth/basic-cimd) oauth=cimd ;;
  # The connect URL's three shapes, one scenario each besides the default
  # (below: a 2026-07-28 client that declared URL elicitation gets an
  # input_required result): -32042 to a 2025-11-25 client that declared URL
  # elicitation, -31007 to one that did not.
  auth/metadata-default) oauth=discover driver_args=(-protocol 2025-11-25) ;;
  auth/metadata-var1) oauth=discover driver_args=(-protocol 2025-11-25) elicit="" ;;
  auth/metadata-var2 | auth/metadata-var3 | auth/scope-* | auth/token-endpoint-auth-* | \
    auth/2025-03-26-oauth-* | auth/resource-mismatch | auth/offline-access-* | \
    auth/authorization-server-migration | auth/iss-* | auth/metadata-issuer-mismatch) oauth=discover ;;
  *) fail "no driver step for scenario \"$scenario\"" ;;
esac
# A refused account (no tools after connecting) is seen only when no
# list_changed comes: wait 5s for one before connecting again.
if [ -n "$oauth" ] && [ "$oauth" != client-credentials ]; then
  driver_args+=(-connect -connect-wait 5s -tool test-tool ${elicit:+"$elicit"})
fi
[ -z "$oauth" ] || timeout=30s
# The template must match: an auth/* scenario needs the oauth block.
if grep -q '@OAUTH@' "$CONFORMANCE_TEMPLATE"; then
  [ -n "$oauth" ] || fail "scenario $scenario is not an auth/* scenario, but the template $CONFORMANCE_TEMPLATE has an oauth block"
else
  [ -z "$oauth" ] || fail "scenario $scenario needs a template with an oauth block (@OAUTH@), not $CONFORMANCE_TEMPLATE"
fi

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

# oauth_block KIND: prints the server's oauth block, a YAML flow mapping
# (JSON), for KIND; a client secret from the context goes to
# MCPGW_CONFORMANCE_CLIENT_SECRET (exported for mcpgw), never into the file.
# The context is the suite's; its values are checked before they are used.
# shellcheck disable=SC2016 # the ${...} is for mcpgw to expand
oauth_block() {
  "$CONFORMANCE_NODE" -e '
    const [kind, part] = process.argv.slice(1);
    const bad = (m) => { console.error(`client-via-mcpgw: error: MCP_CONFORMANCE_CONTEXT: ${m}`); process.exit(1); };
    let ctx = {};
    if (kind === "pre-registered" || kind === "client-credentials") {
      try { ctx = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || ""); } catch { bad("not set or not JSON"); }
      if (typeof ctx.client_id !== "string" || !/^[A-Za-z0-9._~:\/-]{1,256}$/.test(ctx.client_id)) bad("client_id missing or not a plain identifier");
      if (typeof ctx.client_secret !== "string" || !/^[\x21-\x7e]{1,512}$/.test(ctx.client_secret)) bad("client_secret missing or not printable ASCII");
    }
    if (part === "secret") { process.stdout.write(ctx.client_secret || ""); process.exit(0); }
    const secret = "${MCPGW_CONFORMANCE_CLIENT_SECRET}";
    const blocks = {
      discover: {},
      "pre-registered": { client_id: ctx.client_id, client_secret: secret },
      "client-credentials": { grant: "client_credentials", client_id: ctx.client_id, client_secret: secret },
      // The URL the suite expects as client_id (basic-cimd); it never fetches it.
      cimd: { client_metadata_url: "https://conformance-test.local/client-metadata.json" },
    };
    if (!Object.hasOwn(blocks, kind)) bad(`no oauth block for ${kind}`);
    process.stdout.write(JSON.stringify(blocks[kind]));
  ' "$@"
}
block=""
if [ -n "$oauth" ]; then
  block=$(oauth_block "$oauth") || fail "cannot make the oauth block of $scenario"
  MCPGW_CONFORMANCE_CLIENT_SECRET=$(oauth_block "$oauth" secret) || fail "cannot read the client secret of $scenario"
  export MCPGW_CONFORMANCE_CLIENT_SECRET
fi

# free_port prints a port that was free on 127.0.0.1 a moment ago.
free_port() {
  "$CONFORMANCE_NODE" -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })'
}

token=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
hash=$(printf %s "$token" | sha256sum | cut -d' ' -f1)
# A template with an API key (@USER_KEY_SHA256@) gets one made now; the
# driver reads it from the environment.
user_hash=""
if grep -q '@USER_KEY_SHA256@' "$CONFORMANCE_TEMPLATE"; then
  MCPGW_CONFORMANCE_USER_KEY=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
  export MCPGW_CONFORMANCE_USER_KEY
  user_hash=$(printf %s "$MCPGW_CONFORMANCE_USER_KEY" | sha256sum | cut -d' ' -f1)
  driver_args+=(-bearer-env MCPGW_CONFORMANCE_USER_KEY)
fi
# A template with @PORT@ (public_url) gets a port picked now; another
# process may take it before mcpgw does, so mcpgw failing to start is
# retried on a new port, twice.
addr=""
for attempt in 1 2 3; do
  port=0
  if grep -q '@PORT@' "$CONFORMANCE_TEMPLATE"; then port=$(free_port) || fail "no free port"; fi
  sed -e "s|@DATA_DIR@|$dir/data|g" \
    -e "s|@ADMIN_TOKEN_SHA256@|$hash|g" \
    -e "s|@USER_KEY_SHA256@|$user_hash|g" \
    -e "s|@UPSTREAM_URL@|$url|g" \
    -e "s|@PORT@|$port|g" \
    "$CONFORMANCE_TEMPLATE" >"$dir/mcpgw.yaml.partial"
  # The block is JSON from above: no sed, whatever it holds.
  BLOCK=$block "$CONFORMANCE_NODE" -e '
    const fs = require("fs"); const f = process.argv[1];
    fs.writeFileSync(f, fs.readFileSync(f, "utf8").replaceAll("@OAUTH@", () => process.env.BLOCK));
  ' "$dir/mcpgw.yaml.partial"
  mv "$dir/mcpgw.yaml.partial" "$dir/mcpgw.yaml"
  if grep -n '^[^#]*@[A-Z_]*@' "$dir/mcpgw.yaml" >&2; then fail "placeholders left in $dir/mcpgw.yaml"; fi
  "$CONFORMANCE_MCPGW" validate --config "$dir/mcpgw.yaml" >&2 || fail "mcpgw rejects $dir/mcpgw.yaml"

  # The log exists before mcpgw starts, so that reading it never races its
  # creation.
  : >"$dir/mcpgw.log"
  "$CONFORMANCE_MCPGW" serve --config "$dir/mcpgw.yaml" 2>>"$dir/mcpgw.log" &
  pid=$!
  printf '%s\n' "$pid" >"$dir/mcpgw.pid"
  for _ in $(seq 1 150); do
    addr=$(sed -n 's/.*"msg":"listening".*"addr":"\([^"]*\)".*/\1/p' "$dir/mcpgw.log" | head -1)
    [ -z "$addr" ] || break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -z "$addr" ] || break
  kill -0 "$pid" 2>/dev/null && break # alive but silent: no retry helps
  wait "$pid" 2>/dev/null || true
  pid=""
  [ "$port" != 0 ] || break
  say "mcpgw did not start on port $port (attempt $attempt); its log:"
  cat "$dir/mcpgw.log" >&2
done
[ -n "$addr" ] || fail "mcpgw did not start listening"

# The suite's client scenario ends after 60s: give up on the upstream well
# before, and at once when its start has failed. A server whose users
# connect their own accounts cannot run before one has (its start fails,
# and mcpgw lists its connect tool instead): there is nothing to wait for.
if [ -z "$oauth" ] || [ "$oauth" = client-credentials ]; then
  rc=0
  MCPGW_ADMIN_TOKEN=$token "$CONFORMANCE_NODE" "$conf_dir/wait-running.cjs" \
    "http://$addr/admin/servers/fake" 20 --fail-fast >"$dir/upstream-status.json" || rc=$?
  if [ "$rc" -ne 0 ]; then
    cat "$dir/upstream-status.json" >&2
    fail "the upstream fake did not reach state running in mcpgw (see its status above)"
  fi
fi

# In the background, so that a SIGTERM reaches the trap at once.
"$CONFORMANCE_DRIVER" -url "http://$addr/mcp" -timeout "$timeout" ${driver_args[@]+"${driver_args[@]}"} &
wait "$!" || fail "the driver failed (scenario $scenario)"

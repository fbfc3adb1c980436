#!/usr/bin/env bash
# Runs the example: the demo server over streamable HTTP on 127.0.0.1:8091,
# and mcpgw on 127.0.0.1:8080 with mcpgw.yaml, which fronts that server and
# the same demo server over stdio. Ctrl-C (SIGINT) or SIGTERM stops both,
# waits for them and exits 0; if mcpgw ends by itself, the script stops the
# demo server and exits with mcpgw's status.
#
# The environment may name other binaries (MCPGW_BIN, DEMO_BIN), another
# config (MCPGW_CONFIG) and another address for the demo server (DEMO_ADDR;
# port 0 takes a free one). The demo server's URL is exported as
# DEMO_HTTP_URL, which mcpgw.yaml expands.
set -euo pipefail
cd "$(dirname "$0")/.."
mcpgw=${MCPGW_BIN:-bin/mcpgw}
demo_bin=${DEMO_BIN:-bin/demo-server}
config=${MCPGW_CONFIG:-mcpgw.yaml}
demo_addr=${DEMO_ADDR:-127.0.0.1:8091}
if [ ! -x "$mcpgw" ] || [ ! -x "$demo_bin" ]; then
  echo "building mcpgw and the demo server (the first build compiles the SQLite driver and takes a few minutes)..." >&2
  go build -o bin/ ./cmd/mcpgw ./examples/demo-server
fi

tmp=$(mktemp -d)
demo= gw= relay=

# stop ends the servers and waits for them. A terminal's Ctrl-C reaches
# them too; SIGTERM is for a signal sent to this script alone. The relay of
# the demo server's stderr ends when the demo server does.
stop() {
  trap '' INT TERM
  for pid in $gw $demo; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in $gw $demo $relay; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap stop EXIT
# An interrupt is how the example is meant to end: exit 0 (stop runs on
# EXIT), so that make reports no error.
trap 'exit 0' INT TERM

# The demo server says where it listens on its stderr; read it through a
# FIFO (the address may have port 0), and pass the rest of its stderr on.
mkfifo "$tmp/demo-stderr"
"$demo_bin" -http "$demo_addr" -name demo-http 2>"$tmp/demo-stderr" &
demo=$!
exec 3<"$tmp/demo-stderr"
url=
while IFS= read -r line <&3; do
  printf '%s\n' "$line" >&2
  case $line in
  "listening on "*) url=${line#listening on }; break ;;
  esac
done
if [ -z "$url" ]; then
  echo "the demo server did not start" >&2
  exit 1
fi
cat <&3 >&2 &
relay=$!
exec 3<&-
export DEMO_HTTP_URL=$url

"$mcpgw" serve --config "$config" &
gw=$!
status=0
wait "$gw" || status=$?
gw=
exit "$status"

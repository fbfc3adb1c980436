#!/usr/bin/env bash
# Runs the example: the demo server over streamable HTTP on 127.0.0.1:8091,
# and mcpgw on 127.0.0.1:8080 with mcpgw.yaml, which fronts that server and
# the same demo server over stdio. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x bin/mcpgw ] && [ -x bin/demo-server ] || go build -o bin/ ./cmd/mcpgw ./examples/demo-server

bin/demo-server -http 127.0.0.1:8091 -name demo-http &
demo=$!
trap 'kill "$demo" 2>/dev/null; wait "$demo" 2>/dev/null || true' EXIT INT TERM

# Start the gateway once the demo server accepts connections, so that its
# first connection attempt finds it.
for _ in $(seq 1 100); do
  (exec 3<>/dev/tcp/127.0.0.1/8091) 2>/dev/null && break
  kill -0 "$demo" 2>/dev/null || { echo "the demo server did not start" >&2; exit 1; }
  sleep 0.1
done

bin/mcpgw serve --config mcpgw.yaml

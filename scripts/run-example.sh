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

bin/mcpgw serve --config mcpgw.yaml

# The README's two commands are `make run` and `make test`.

.PHONY: run test build clean

# build puts mcpgw and the demo server in ./bin. A cold build is silent
# for minutes, so it says so first.
build:
	@echo "building mcpgw (the first build compiles the SQLite driver and takes a few minutes)..."
	go build -o bin/ ./cmd/mcpgw
	go build -o bin/ ./examples/demo-server

# run starts the demo server over HTTP and mcpgw in front of it and of the
# same server over stdio, with the example config mcpgw.yaml. Ctrl-C stops
# both and the script exits 0 (scripts/run-example.sh).
run: build
	./scripts/run-example.sh

# test is exactly what CI runs after go vet.
test:
	go test -race ./...

clean:
	rm -rf bin data

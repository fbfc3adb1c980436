#!/usr/bin/env bash
# A throwaway PostgreSQL for the tests (CI starts one for the whole run; it
# is also handy by hand):
#
#   scripts/postgres.sh start DIR   # prints the server's DSN on stdout
#   scripts/postgres.sh stop DIR    # stops it and removes DIR
#
# The cluster lives in DIR (new or empty; under root, somewhere user nobody
# can reach, such as mktemp -d), listens on 127.0.0.1 only, on a free port,
# with a random password, and durability off: its data is thrown away.
# initdb refuses to run as root, so under root the server runs as nobody.
# Debian's server binaries are used (apt-get install postgresql), else the
# initdb on PATH.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1 dir=$2

bindir() {
  local newest
  newest=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -n "$newest" ] && [ -x "$newest/initdb" ]; then
    echo "$newest"
  elif command -v initdb >/dev/null; then
    dirname "$(readlink -f "$(command -v initdb)")"
  else
    echo "postgres.sh: initdb not found: apt-get install postgresql" >&2
    return 1
  fi
}

# as_pg runs a server binary as the user the cluster belongs to.
as_pg() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u nobody -- "$@"
  else
    "$@"
  fi
}

bin=$(bindir)
case $cmd in
start)
  mkdir -p "$dir"
  chmod 700 "$dir"
  if [ -n "$(ls -A "$dir")" ]; then
    echo "postgres.sh: $dir is not empty" >&2
    exit 1
  fi
  password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  (umask 077 && printf '%s\n' "$password" >"$dir/pw")
  if [ "$(id -u)" = 0 ]; then
    chown -R nobody: "$dir"
  fi
  if ! as_pg "$bin/initdb" -D "$dir/data" -U mcpgw --pwfile "$dir/pw" \
      --auth=scram-sha-256 -E UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1; then
    cat "$dir/initdb.log" >&2
    exit 1
  fi
  rm -f "$dir/pw"
  # A port free now can be taken before the server binds it: try a few.
  for _ in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 40000))
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      continue # in use
    fi
    # -w waits until the server accepts connections (bounded by -t).
    if as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
        start >"$dir/pg_ctl.log" 2>&1; then
      echo "postgres://mcpgw:$password@127.0.0.1:$port/postgres?sslmode=disable"
      exit 0
    fi
  done
  cat "$dir/pg_ctl.log" "$dir/server.log" >&2 2>/dev/null || true
  exit 1
  ;;
stop)
  if [ -d "$dir/data" ]; then
    as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null
  fi
  rm -rf "$dir"
  ;;
*)
  usage
  ;;
esac

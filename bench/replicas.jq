# Turns the JSON reports of bench/replicas.sh (slurped: jq -rs) into the
# BENCHMARKS.md "Replicas" tables. Every figure is the median over the
# rounds; every ratio is the median of each round's ratio between that
# round's two runs, and each round's ratio follows it. A run's mcpgw CPU
# per call is that of every mcpgw it watched (both replicas in the PG
# cases); PostgreSQL's is its postmaster's and its backends' (pg_pid).
def r(x): if x == null then "–" elif x >= 100 then (x | round | tostring) else ((x * 10 | round) / 10 | tostring) end;
def median: map(select(. != null)) | sort
  | if length == 0 then null elif length % 2 == 1 then .[(length - 1) / 2] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
def x2(x): if x == null then "–" else ((x * 100 | round) / 100 | tostring) + "×" end;
def watchedAll: if .watched == null then [] else [.watched] + (.also_watched // []) end;
def cpu: .pg_pid as $pg | watchedAll | map(select(.pid != $pg)) | if length == 0 then null else map(.cpu_us_per_req) | add end;
def pgcpu: .pg_pid as $pg | watchedAll | map(select(.pid == $pg)) | if length == 0 then null else map(.cpu_us_per_req + .children_cpu_us_per_req) | add end;
def total: if cpu == null then null else cpu + (pgcpu // 0) end;
def p50: .latency_us.p50;
def runsOf($case): map(select(.case == $case));
# ratio(a; b; f): each round's f of the a run over f of the b run, and
# their median first.
def ratio($a; $b; f): . as $all | [range(1; ($all | map(.round) | max) + 1)]
  | map(. as $k | ($all | map(select(.case == $a and .round == $k)) | first) as $x
        | ($all | map(select(.case == $b and .round == $k)) | first) as $y
        | if $x == null or $y == null or (($y | f) // 0) == 0 or ($x | f) == null then null else ($x | f) / ($y | f) end)
  | "\(x2(median)) (\(map(x2(.)) | join(", ")))";
. as $all
| ["call, SQLite", "call, PG local", "call, PG forwarded", "task, SQLite", "task, PG"] as $cases
| "| case | req/s | p50 µs | mcpgw CPU µs/call | PostgreSQL CPU µs/call | tasks/get per task | errors |",
  "|---|---:|---:|---:|---:|---:|---:|",
  ($cases[] as $c | ($all | runsOf($c)) as $runs | select($runs | length > 0)
   | "| \($c) | \(r($runs | map(.rps) | median)) | \(r($runs | map(p50) | median)) | \(r($runs | map(cpu) | median)) | \(r($runs | map(pgcpu) | median)) | \(if $c | startswith("task") then r($runs | map(.task.gets_per_task) | median) else "–" end) | \($runs | map(.errors) | add) |"),
  "",
  "| ratio (median; each round) | mcpgw CPU µs/call | mcpgw + PostgreSQL CPU µs/call | req/s | p50 µs |",
  "|---|---|---|---|---|",
  (["call: PG local / SQLite", "call, PG local", "call, SQLite"],
   ["call: forwarded / local (PG)", "call, PG forwarded", "call, PG local"],
   ["hosted task: PG / SQLite", "task, PG", "task, SQLite"]
   | . as [$name, $a, $b]
   | "| \($name) | \($all | ratio($a; $b; cpu)) | \($all | ratio($a; $b; total)) | \($all | ratio($a; $b; .rps)) | \($all | ratio($a; $b; p50)) |")

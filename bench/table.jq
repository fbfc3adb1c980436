# Turns the JSON reports of bench/bench.sh (slurped: jq -rs) into the
# BENCHMARKS.md tables. Every figure is the median over the rounds of one
# run; every ratio is the median of each round's ratio between that
# round's runs: mcpgw to the upstream reached directly, and mcpgw's CPU
# per call to the floor server's at the same number of sessions.
def r(x): if x == null then "–" elif x >= 100 then (x | round | tostring) else ((x * 10 | round) / 10 | tostring) end;
def median: map(select(. != null)) | sort
  | if length == 0 then null elif length % 2 == 1 then .[(length - 1) / 2] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
def ratio(a; b): if a == null or b == null or b == 0 then "–" else ((a / b * 100 | round) / 100 | tostring) + "×" end;
def pct(a; b): if a == null or b == null or b == 0 then "–" else ((a / b * 1000 | round) / 10 | tostring) + "%" end;
# one(case; via): that case's runs through via, as one report of medians.
def one($case; $via): map(select(.case == $case and .via == $via)) | if length == 0 then null else . as $runs | $runs[0] + {
    rps: (map(.rps) | median),
    p50: (map(.latency_us.p50) | median),
    cpu: (map(.watched.cpu_us_per_req) | median),
    children: (map(.watched.children_cpu_us_per_req) | median),
    rss: (map(.watched.peak_rss_mib) | max),
    errors: (map(.errors) | add),
    rounds: map({round, rps, cpu: .watched.cpu_us_per_req, children: .watched.children_cpu_us_per_req})} end;
def floorAt($n): one("floor, \($n) sessions"; "floor").cpu;
# perRound(a; b; f): for each round with both, f of that round's a run
# and b run ({a, b}); the ratios of a case are the medians of these, so
# that each pairs runs of the same round.
def perRound(a; b; f): . as $all | [range(1; ($all | map(.round) | max) + 1)]
  | map(. as $k | {a: ($all | map(select(.case == a.case and .via == a.via and .round == $k)) | first),
                   b: ($all | map(select(.case == b.case and .via == b.via and .round == $k)) | first)}
        | select(.a != null and .b != null) | f);
def xratio(x): if x == null then "–" else ((x * 100 | round) / 100 | tostring) + "×" end;
def xpct(x): if x == null then "–" else ((x * 1000 | round) / 10 | tostring) + "%" end;
def sessionsOf: capture(", (?<n>[0-9]+) sessions$").n;
# order: the small calls over stdio, then over HTTP, by sessions, then
# the rest as the script ran them.
def order: if test("^stdio, ") then [0, (sessionsOf | tonumber)] elif test("^http, ") then [1, (sessionsOf | tonumber)] else [2, 0] end;
. as $all
| ($all | map(.case) | unique | sort_by(order)) as $cases
| ($all | map(.via) | unique | map(select(. != "direct" and . != "floor"))) as $builds
| ($all | map(select(.via == "floor")) | map(.sessions) | unique) as $floors
| ["stdio", "http"] as $legs
| "| case | req/s direct | req/s mcpgw | ×direct | p50 µs direct | p50 µs mcpgw | mcpgw CPU µs/call | ×floor | mcpgw peak RSS MiB | errors |",
  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ($cases[] | select(test("^(stdio|http|64 KiB|tools/list)")) as $c
   | ($all | one($c; "direct")) as $d | ($all | one($c; "mcpgw")) as $m
   | select($m != null)
   | ($all | perRound({case: $c, via: "mcpgw"}; {case: $c, via: "direct"}; if .b.rps > 0 then .a.rps / .b.rps else null end) | median) as $xd
   | (if ($c | test("^(stdio|http), ")) then ($all | perRound({case: $c, via: "mcpgw"}; {case: "floor, \($c | sessionsOf) sessions", via: "floor"};
         if (.b.watched.cpu_us_per_req // 0) > 0 then .a.watched.cpu_us_per_req / .b.watched.cpu_us_per_req else null end) | median) else null end) as $xf
   | "| \($c) | \(r($d.rps)) | \(r($m.rps)) | \(xratio($xd)) | \(r($d.p50)) | \(r($m.p50)) | \(r($m.cpu)) | \(xratio($xf)) | \(r($m.rss)) | \(($d.errors // 0) + $m.errors) |"),
  "",
  "The floor server's CPU per call: \($floors | map(. as $n | "\(r($all | floorAt($n))) µs at \($n) sessions") | join(", ")).",
  ($all | one("64 KiB result, stdio, 8 sessions"; "mcpgw") | select(. != null)
   | "A 64 KiB result costs mcpgw \(xpct(.rounds | map(if (.children // 0) > 0 then .cpu / .children else null end) | median)) of the CPU its stdio upstream spends producing it (per round: \(.rounds | map(pct(.cpu; .children)) | join(", ")))."),
  ($all | map(select(.idle != null and .via == "mcpgw")) | .[]
   | "\(.sessions) idle sessions, each holding its GET stream: RSS \(r(.idle.rss_before_mib)) → \(r(.idle.rss_mib)) MiB, \(r(.idle.rss_per_session_kib)) KiB per session (\(.errors) errors)."),
  "",
  "Each round's ×direct and ×floor for the small calls (the table gives their medians):",
  "",
  ($cases[] | select(test("^(stdio|http), ")) as $c
   | ($c | sessionsOf | tonumber) as $n
   | [range(1; ($all | map(.round) | max) + 1)] | map(. as $k
       | ($all | map(select(.case == $c and .round == $k))) as $rr
       | ($rr | map(select(.via == "direct")) | first) as $d | ($rr | map(select(.via == "mcpgw")) | first) as $m
       | ($all | map(select(.case == "floor, \($n) sessions" and .round == $k)) | first) as $f
       | "\(ratio($m.rps; $d.rps)) / \(ratio($m.watched.cpu_us_per_req; $f.watched.cpu_us_per_req))")
   | "- \($c): \(join(", "))"),
  (if ($builds | length) < 2 then empty else
    ($builds | map(select(. != "mcpgw"))) as $others
    | "",
    "Other builds in the same rounds: mcpgw's CPU µs per call (median; then as a multiple of this build's), and req/s.",
    "",
    "| case | \($others | map("\(.) CPU µs/call") | join(" | ")) | this build | \($others | map("\(.) req/s") | join(" | ")) | this build req/s |",
    "|---|\([range(0; 2 * ($others | length) + 2)] | map("---:") | join("|"))|",
    ($cases[] as $c | ($all | one($c; "mcpgw")) as $m
     | select($m != null and $m.idle == null)
     | ($others | map(. as $b | $all | one($c; $b))) as $os
     | "| \($c) | \($os | map("\(r(.cpu)) (\(ratio(.cpu; $m.cpu)))") | join(" | ")) | \(r($m.cpu)) | \($os | map(r(.rps)) | join(" | ")) | \(r($m.rps)) |"),
    "",
    ($all | map(select(.idle != null)) | .[]
     | "- \(.via): \(.sessions) idle sessions, \(r(.idle.rss_per_session_kib)) KiB per session.")
  end)

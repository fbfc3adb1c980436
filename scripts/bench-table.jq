# Turns the JSON lines of scripts/bench.sh (slurped: jq -rs) into the
# BENCHMARKS.md table: each case through mcpgw beside its direct run, and
# the ratios to direct measured in the same run; then mcpgw's CPU per
# small call as a multiple of the floor's (a bare net/http echo server) at
# the same session count, beside issue 10's targets in the same unit, and
# beside the relay floor's (via "relay": e2e/fixtures/relayfloor, the
# floor's edge relaying to the same upstream and nothing more; beside the
# lean upstreams via "C relay": e2e/fixtures/crelay); the 64
# KiB case's share of its upstream's CPU; and, with more than one round,
# each round's own ratios beside the ratios of the medians.
def r(x): if x == null then "–" else ((x * 10 | round) / 10 | tostring) end;
def median: map(select(. != null)) | sort
  | if length == 0 then null elif length % 2 == 1 then .[(length - 1) / 2] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
# collapse: one report per case and via, in the order of their first
# runs, with the rounds' medians; errors are summed. Peak RSS is the first
# round's: it is the process's peak since it started (VmHWM), and in later
# rounds that includes the larger cases of the rounds before.
# addedBy(via): for the runs of one case (every via, every round), each
# round's p50 added by via over that round's direct run, in the order of
# the rounds; null for a round without both.
def addedBy(via): (map(.round // 1) | unique) as $rs | . as $runs
  | $rs | map(. as $n | ($runs | map(select((.round // 1) == $n))) as $r
      | ($r | map(select(.via == "direct")) | first) as $d | ($r | map(select(.via == via)) | first) as $v
      | if $d == null or $v == null then null else $v.latency_us.p50 - $d.latency_us.p50 end);
# p50_added is the median of addedBy: a round the machine slowed slows
# both of its runs, and a difference of the medians would pair runs of
# different rounds.
def collapse: . as $all | to_entries | map(.value + {order: .key}) | group_by([.case, .via]) | map(
  . as $runs | $runs[0] + {
    p50_added: (if $runs[0].via == "direct" then null
      else $all | map(select(.case == $runs[0].case)) | addedBy($runs[0].via) | median end),
    rounds: length,
    rps: (map(.rps) | median),
    latency_us: (($runs[0].latency_us // {}) + {p50: (map(.latency_us.p50) | median), p99: (map(.latency_us.p99) | median)}),
    watched: (if $runs[0].watched == null then null else $runs[0].watched + {
      cpu_us_per_req: (map(.watched.cpu_us_per_req) | median),
      children_cpu_us_per_req: (map(.watched.children_cpu_us_per_req) | median),
      peak_rss_mib: (min_by(.round // 1) | .watched.peak_rss_mib)} end),
    errors: (map(.errors) | add)}) | sort_by(.order);
def ratio(a; b): if a == null or b == null or b == 0 then "–" else ((a / b * 100 | round) / 100 | tostring) + "×" end;
def pct(a; b): if a == null or b == null or b == 0 then "–" else ((a / b * 1000 | round) / 10 | tostring) + "%" end;
# rounds: for each case run both directly and through mcpgw in more than
# one round, the pairs of its rounds' adjacent runs, {d, m} per round.
def rounds: map(select(.via == "direct" or .via == "mcpgw")) | group_by(.case)
  | map(select(any(.[]; .via == "mcpgw") and any(.[]; .via == "direct") and (map(.round // 1) | unique | length) > 1))
  | map(. as $runs | {case: $runs[0].case, pairs: [(map(.round // 1) | unique)[] as $n
      | ($runs | map(select((.round // 1) == $n))) as $r
      | {d: ($r | map(select(.via == "direct")) | first), m: ($r | map(select(.via == "mcpgw")) | first)}]});
# added(via): addedBy(via), as the table's text.
def added(via): addedBy(via) | map(r(.)) | join(", ");
. as $raw
| collapse
| group_by(.case) as $cases
| "| case | via | req/s | ×direct | p50 µs | p99 µs | p50 added µs | server CPU µs/req | its children µs/req | peak RSS MiB | errors |",
  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ($cases[] | (map(select(.via == "direct")) | first) as $d
   | .[] | select(.idle == null)
   | (if .via == "direct" then (.watched.cpu_us_per_req // null) else .watched.cpu_us_per_req end) as $cpu
   | "| \(.case) | \(.via) | \(r(.rps)) | \(if .via == "mcpgw" or .via == "relay" or .via == "C relay" then ratio(.rps; $d.rps) elif .via == "direct" then "1×" else "–" end) | \(r(.latency_us.p50)) | \(r(.latency_us.p99)) | \(if (.via == "mcpgw" or .via == "relay" or .via == "C relay") and $d != null then r(.p50_added // (.latency_us.p50 - $d.latency_us.p50)) else "–" end) | \(r($cpu)) | \(r(.watched.children_cpu_us_per_req)) | \(r(.watched.peak_rss_mib)) | \(.errors) |"),
  "",
  ($cases[] | .[] | select(.idle != null)
   | "Idle: \(.sessions) sessions held open with their GET streams: RSS \(r(.idle.rss_before_mib)) → \(r(.idle.rss_mib)) MiB, \(r(.idle.rss_per_session_kib)) KiB per session (opened in \(r(.idle.open_s)) s, \(.errors) errors)."),
  "",
  ((map(select(.via == "floor")) | map({key: (.sessions | tostring), value: .watched.cpu_us_per_req}) | from_entries) as $floor
   | (map(select(.via == "relay" or .via == "C relay")) | map({key: .case, value: {via, cpu: .watched.cpu_us_per_req}}) | from_entries) as $relay
   | if ($floor | length) == 0 then empty else
     "CPU per small call as a multiple of the floor's (\($floor | to_entries | map("\(.value | r(.)) µs at \(.key)") | join(", "))); the targets are 35 and 60 µs over a 24 µs floor, 1.46× (stdio) and 2.5× (HTTP). Beside each, the relay floor's (beside the lean upstreams, the C relay's), and mcpgw's as a multiple of it:",
     "",
     (.[] | select(.via == "mcpgw" and (.case | test("^echo (lean )?(stdio|http), [0-9]+ sessions$"))) | select($floor[.sessions | tostring] != null)
      | $floor[.sessions | tostring] as $f | $relay[.case] as $rl
      | "- \(.case): \(r(.watched.cpu_us_per_req)) µs, \(ratio(.watched.cpu_us_per_req; $f))"
        + (if $rl == null then "" else ($rl.via | if . == "relay" then "the relay floor" else "the C relay" end) as $n
           | "; \($n) \(r($rl.cpu)) µs, \(ratio($rl.cpu; $f)); mcpgw \(ratio(.watched.cpu_us_per_req; $rl.cpu)) \($n)'s" end))
     end),
  "",
  (.[] | select(.via == "mcpgw" and (.case | test("KiB payload stdio")))
   | "\(.case): mcpgw's CPU per call is \(pct(.watched.cpu_us_per_req; .watched.children_cpu_us_per_req)) of its upstream's (its server CPU over its children's, in the table); the target is 10%."),
  ($raw | rounds | if length == 0 then empty else
     "",
     "Each round's own ratios, between a round's adjacent direct and mcpgw runs of a case (the table gives the ratios of the medians):",
     "",
     (.[] | "- \(.case): ×direct \(.pairs | map(ratio(.m.rps; .d.rps)) | join(", "))"
        + (if .case | test("KiB payload stdio") then "; mcpgw's CPU as a share of its upstream's \(.pairs | map(pct(.m.watched.cpu_us_per_req; .m.watched.children_cpu_us_per_req)) | join(", "))" else "" end))
     end)
  ,
  ($raw | map(select(.case | test(", 1 sessions$"))) | group_by(.case)
   | map(select(any(.[]; .via == "mcpgw") and (map(.round // 1) | unique | length) > 1))) as $one
  | if ($one | length) == 0 then empty else
     "",
     "The p50 added at one session in each round (the table gives their median), by mcpgw and by the relay floors in front of the same upstream:",
     "",
     ($one[] | "- \(.[0].case): mcpgw \(added("mcpgw")) µs"
        + (if any(.[]; .via == "relay") then "; the relay floor \(added("relay")) µs" else "" end)
        + (if any(.[]; .via == "C relay") then "; the C relay \(added("C relay")) µs" else "" end))
     end

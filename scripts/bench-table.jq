# Turns the JSON lines of scripts/bench.sh (slurped: jq -rs) into the
# BENCHMARKS.md table: each case through mcpgw beside its direct run, and
# the ratios to direct measured in the same run.
def r(x): if x == null then "–" else ((x * 10 | round) / 10 | tostring) end;
def ratio(a; b): if a == null or b == null or b == 0 then "–" else ((a / b * 100 | round) / 100 | tostring) + "×" end;
group_by(.case) as $cases
| "| case | via | req/s | ×direct | p50 µs | p99 µs | p50 added µs | server CPU µs/req | its children µs/req | peak RSS MiB | errors |",
  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ($cases[] | (map(select(.via == "direct")) | first) as $d
   | .[] | select(.idle == null)
   | (if .via == "direct" then (.watched.cpu_us_per_req // null) else .watched.cpu_us_per_req end) as $cpu
   | "| \(.case) | \(.via) | \(r(.rps)) | \(if .via == "mcpgw" then ratio(.rps; $d.rps) else "1×" end) | \(r(.latency_us.p50)) | \(r(.latency_us.p99)) | \(if .via == "mcpgw" and $d != null then r(.latency_us.p50 - $d.latency_us.p50) else "–" end) | \(r($cpu)) | \(r(.watched.children_cpu_us_per_req)) | \(r(.watched.peak_rss_mib)) | \(.errors) |"),
  "",
  ($cases[] | .[] | select(.idle != null)
   | "Idle: \(.sessions) sessions held open with their GET streams: RSS \(r(.idle.rss_before_mib)) → \(r(.idle.rss_mib)) MiB, \(r(.idle.rss_per_session_kib)) KiB per session (opened in \(r(.idle.open_s)) s, \(.errors) errors).")

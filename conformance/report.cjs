// report.cjs: reads the results of conformance runs and judges them, for
// scripts/conformance.sh. Plain Node, no packages.
//
//   node report.cjs baseline <title> <run-dir> <known-scenarios-file>
//       Prints one run's per-scenario table and "<title>: P/T scenarios".
//       Exits 1 if a scenario failed: the reference server passes them all,
//       so a failure here means the harness, not mcpgw, is broken.
//
//   node report.cjs compare <title> <list> <baseline-dir> <gateway-dir>
//                           <expected-failures.yaml> <known-scenarios-file>
//       Compares a gateway run with its baseline scenario by scenario, using
//       the list <list> (http or stdio) of expected-failures.yaml. Prints the
//       table and "<title>: P/T scenarios, E expected failures, R regressions".
//       Exits 1 on a regression (passes on the baseline, fails through mcpgw,
//       not listed), on a listed scenario that passes (the list must shrink
//       as mcpgw improves), on a baseline failure or on a bad list.
//
// A run directory holds conformance.log (the CLI's output) and results/, where
// the CLI writes results/server-<scenario>-<timestamp>/checks.json. The log's
// "=== Running scenario: X ===" lines say which scenarios ran; one without a
// checks.json (the CLI gave up on it) counts as failed. A scenario passes when
// none of its checks has status FAILURE (WARNING and INFO do not fail it).
'use strict';

const fs = require('node:fs');
const path = require('node:path');

function readScenarios(dir) {
  const log = fs.readFileSync(path.join(dir, 'conformance.log'), 'utf8');
  const ran = [...log.matchAll(/^=== Running scenario: (\S+) ===$/gm)].map((m) => m[1]);
  const crashed = new Map();
  for (const m of log.matchAll(/^Failed to run scenario (\S+?):\s*(.*)$/gm)) crashed.set(m[1], m[2]);

  // The CLI makes a scenario's folder before it runs it, and writes
  // checks.json after. With --scenario it prints no "Running" line, so the
  // folders name the scenarios too.
  const checks = new Map();
  const resultsDir = path.join(dir, 'results');
  const entries = fs.existsSync(resultsDir) ? fs.readdirSync(resultsDir).sort() : [];
  for (const e of entries) {
    const m = /^server-(.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d+Z$/.exec(e);
    if (!m) continue;
    if (!ran.includes(m[1])) ran.push(m[1]);
    const file = path.join(resultsDir, e, 'checks.json');
    if (fs.existsSync(file)) checks.set(m[1], JSON.parse(fs.readFileSync(file, 'utf8')));
  }

  const out = new Map();
  for (const name of ran) {
    const cs = checks.get(name);
    if (!cs) {
      out.set(name, { pass: false, counts: '', reason: crashed.get(name) || 'no checks.json: the scenario did not finish (see conformance.log)' });
      continue;
    }
    const n = (s) => cs.filter((c) => c.status === s).length;
    const failed = cs.find((c) => c.status === 'FAILURE');
    out.set(name, {
      pass: !failed,
      counts: `${n('SUCCESS')}/${n('SUCCESS') + n('FAILURE')} checks${n('WARNING') ? `, ${n('WARNING')} warnings` : ''}`,
      reason: failed ? `${failed.id}: ${oneLine(failed.errorMessage || failed.description || '')}` : '',
    });
  }
  return out;
}

function oneLine(s) {
  s = String(s).replace(/\s+/g, ' ').trim();
  return s.length > 160 ? s.slice(0, 157) + '...' : s;
}

// readKnown returns the scenario names `conformance list --server` printed.
function readKnown(file) {
  const text = fs.readFileSync(file, 'utf8');
  return new Set([...text.matchAll(/^\s*-\s+(\S+)/gm)].map((m) => m[1]));
}

// readExpected reads expected-failures.yaml. Only this much YAML is
// accepted: comments, top-level keys "http:" and "stdio:" (a key alone, or
// "key: []"), and list items "  - scenario-name" under them.
function readExpected(file) {
  const lists = {};
  let current = null;
  const errors = [];
  fs.readFileSync(file, 'utf8').split('\n').forEach((raw, i) => {
    const line = raw.replace(/(^|\s)#.*$/, '').trimEnd();
    if (line.trim() === '') return;
    let m;
    if ((m = /^([a-z]+):\s*(\[\])?$/.exec(line))) {
      current = m[1];
      if (lists[current]) errors.push(`${file}:${i + 1}: list "${current}" appears twice`);
      lists[current] = [];
    } else if ((m = /^\s+-\s+([A-Za-z0-9_.-]+)$/.exec(line)) && current) {
      lists[current].push({ name: m[1], line: i + 1 });
    } else {
      errors.push(`${file}:${i + 1}: expected "http:", "stdio:" or "  - scenario-name", got ${JSON.stringify(raw.trim())}`);
    }
  });
  for (const k of Object.keys(lists)) {
    if (k !== 'http' && k !== 'stdio') errors.push(`${file}: unknown list "${k}" (want http or stdio)`);
  }
  return { lists, errors };
}

function table(rows, header) {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const fmt = (r) => ('  ' + r.map((c, i) => (i === r.length - 1 ? String(c) : String(c).padEnd(widths[i]))).join('  ')).trimEnd();
  console.log(fmt(header));
  for (const r of rows) console.log(fmt(r));
}

function baseline([title, dir, knownFile]) {
  const res = readScenarios(dir);
  const known = readKnown(knownFile);
  const rows = [];
  let passed = 0;
  for (const [name, r] of res) {
    if (r.pass) passed++;
    rows.push([name, r.pass ? 'pass' : 'FAIL', r.counts, r.pass ? '' : r.reason]);
  }
  table(rows, ['scenario', 'result', 'checks', '']);
  const problems = [];
  if (res.size === 0) problems.push('no scenario ran: see conformance.log');
  for (const [name, r] of res) if (!r.pass) problems.push(`${name} fails on the reference server itself`);
  for (const name of res.keys()) if (!known.has(name)) problems.push(`${name} is not in "conformance list --server"`);
  console.log(`${title}: ${passed}/${res.size} scenarios`);
  for (const p of problems) console.log(`  error: ${p}`);
  return problems.length ? 1 : 0;
}

function compare([title, listName, baseDir, gwDir, expectedFile, knownFile]) {
  const base = readScenarios(baseDir);
  const gw = readScenarios(gwDir);
  const known = readKnown(knownFile);
  const { lists, errors } = readExpected(expectedFile);
  const listed = new Map((lists[listName] || []).map((e) => [e.name, e.line]));
  const rel = path.relative(process.cwd(), expectedFile) || expectedFile;

  const problems = [...errors];
  for (const [name, line] of listed) {
    if (!known.has(name)) problems.push(`${rel}:${line}: "${name}" is not a conformance scenario`);
  }

  const names = [...base.keys()];
  for (const n of gw.keys()) if (!base.has(n)) names.push(n);
  const rows = [];
  let passed = 0, expected = 0, regressions = 0, stale = 0, baseFails = 0;
  for (const name of names) {
    const b = base.get(name), g = gw.get(name);
    const bs = b ? (b.pass ? 'pass' : 'FAIL') : '-';
    const gs = g ? (g.pass ? 'pass' : 'FAIL') : '-';
    const isListed = listed.has(name);
    let verdict;
    if (g && g.pass) passed++;
    if (!b || !b.pass) {
      baseFails++;
      verdict = 'BASELINE FAILS: cannot judge mcpgw';
      problems.push(`${name}: ${b ? 'fails' : 'did not run'} on the baseline (${b ? b.reason : 'missing'})`);
    } else if (g && g.pass) {
      if (isListed) {
        stale++;
        verdict = `PASSES BUT LISTED: remove it from ${rel} (${listName})`;
        problems.push(`${name} passes through mcpgw now: remove it from the ${listName} list in ${rel} (line ${listed.get(name)})`);
      } else {
        verdict = 'ok';
      }
    } else if (isListed) {
      expected++;
      verdict = 'expected failure';
    } else {
      regressions++;
      verdict = 'REGRESSION';
      problems.push(`regression: ${name} passes on the baseline but fails through mcpgw, and is not in the ${listName} list of ${rel}`);
    }
    rows.push([name, bs, gs, verdict + (g && !g.pass ? `  <- ${g.reason}` : '')]);
  }
  table(rows, ['scenario', 'baseline', 'mcpgw', 'verdict']);
  let summary = `${title}: ${passed}/${names.length} scenarios, ${expected} expected failures, ${regressions} regressions`;
  if (stale) summary += `, ${stale} listed but passing`;
  if (baseFails) summary += `, ${baseFails} failing on the baseline`;
  console.log(summary);
  for (const p of problems) console.log(`  error: ${p}`);
  return problems.length ? 1 : 0;
}

const [cmd, ...args] = process.argv.slice(2);
const commands = { baseline, compare };
if (!commands[cmd]) {
  console.error('usage: report.cjs baseline|compare ... (see the comment at the top)');
  process.exit(2);
}
process.exitCode = commands[cmd](args);

// report.cjs: reads the results of conformance runs and judges them, for
// scripts/conformance.sh. Plain Node, no packages.
//
//   node report.cjs baseline <title> <run-dir> <known-scenarios-file> [<scored-file>]
//       Prints one run's per-scenario table and "<title>: P/T scenarios".
//       Exits 1 if a scenario failed: the reference server passes them all,
//       so a failure here means the harness, not mcpgw, is broken.
//
//   node report.cjs compare <title> <list> <baseline-dir> <gateway-dir>
//                           <expected-failures.yaml> <known-scenarios-file> [<scored-file>]
//       Compares a gateway run with its baseline scenario by scenario, using
//       the list <list> of expected-failures.yaml. Prints the table and
//       "<title>: P/T scenarios, E expected failures, R regressions".
//       Exits 1 on a regression (passes on the baseline, fails through mcpgw,
//       not listed), on a listed scenario that passes (the list must shrink
//       as mcpgw improves), on a baseline failure or on a bad list.
//
//   node report.cjs client-baseline <title> <run-dir> <known-scenarios-file> <scenario>...
//       The baseline's judgement for a run of the client scenarios named
//       against the reference client; each must have run and passed.
//
//   node report.cjs client <title> <list> <baseline-dir> <gateway-dir>
//                          <expected-failures.yaml> <known-scenarios-file> <scenario>...
//                          [-- <scenario>...]
//       The same comparison for the client scenarios named (mcpgw as the
//       client, the list <list>: "client" or "client-auth"), whose results
//       folders carry no "server-" prefix. The scenarios after "--" have no
//       baseline (the reference client does not implement them): each is
//       judged on mcpgw's result alone, and must pass or be listed.
//
// <scored-file> is the output of "conformance list --server --requirements
// REVISION": when given, only the scenarios of its "Server scenarios" part
// are judged (each must have run on the baseline), the others the CLI runs
// with them (extensions, pending) are shown as "not scored", and a list
// may name only scored scenarios.
//
// A run directory holds conformance.log (the CLI's output) and results/, where
// the CLI writes results/server-<scenario>-<timestamp>/checks.json (a
// scenario named "auth/x" lands in results/auth/x-<timestamp>/). The log's
// "=== Running scenario: X ===" lines say which scenarios ran; one without a
// checks.json (the CLI gave up on it) counts as failed. A scenario passes when
// none of its checks has status FAILURE (WARNING, INFO and SKIPPED do not fail
// it).
'use strict';

const fs = require('node:fs');
const path = require('node:path');

// The lists of expected-failures.yaml, one per gateway run.
const LISTS = ['http', 'stdio', 'modern-http', 'modern-legacy-http', 'modern-stdio', 'client', 'client-auth', 'tasks-hosted', 'tasks-relay'];

// TIMESTAMPED matches a results folder's name: the scenario and the time.
const TIMESTAMPED = /^(.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d+Z$/;

function readScenarios(dir, prefix = 'server-') {
  const log = fs.readFileSync(path.join(dir, 'conformance.log'), 'utf8');
  const ran = [...log.matchAll(/^=== Running scenario: (\S+) ===$/gm)].map((m) => m[1]);
  const crashed = new Map();
  for (const m of log.matchAll(/^Failed to run scenario (\S+?):\s*(.*)$/gm)) crashed.set(m[1], m[2]);

  // The CLI makes a scenario's folder before it runs it, and writes
  // checks.json after. With --scenario it prints no "Running" line, so the
  // folders name the scenarios too.
  const checks = new Map();
  const resultsDir = path.join(dir, 'results');
  // A scenario's "/" makes a folder: "auth/x" is results/auth/x-<time>.
  const entries = [];
  const walk = (rel) => {
    const abs = path.join(resultsDir, rel);
    if (!fs.existsSync(abs)) return;
    for (const e of fs.readdirSync(abs, { withFileTypes: true })) {
      if (!e.isDirectory()) continue;
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (TIMESTAMPED.test(e.name)) entries.push(r);
      else if (!rel) walk(r);
    }
  };
  walk('');
  for (const e of entries.sort()) {
    const m = TIMESTAMPED.exec(e);
    if (!m[1].startsWith(prefix)) continue;
    const name = m[1].slice(prefix.length);
    if (!ran.includes(name)) ran.push(name);
    const file = path.join(resultsDir, e, 'checks.json');
    if (fs.existsSync(file)) checks.set(name, JSON.parse(fs.readFileSync(file, 'utf8')));
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

// readScored returns the server scenarios that "conformance list --server
// --requirements REVISION" prints under "Server scenarios", or null without
// a file.
function readScored(file) {
  if (!file) return null;
  const text = fs.readFileSync(file, 'utf8');
  const m = /^Server scenarios[^\n]*\n((?:[ \t]*-[^\n]*\n)+)/m.exec(text);
  if (!m) throw new Error(`${file}: no "Server scenarios" list in it`);
  return new Set([...m[1].matchAll(/^\s*-\s+(\S+)/gm)].map((x) => x[1]));
}

// readExpected reads expected-failures.yaml. Only this much YAML is
// accepted: comments, top-level keys from LISTS (a key alone, or
// "key: []"), and list items "  - scenario-name" under them.
function readExpected(file) {
  const lists = {};
  let current = null;
  const errors = [];
  fs.readFileSync(file, 'utf8').split('\n').forEach((raw, i) => {
    const line = raw.replace(/(^|\s)#.*$/, '').trimEnd();
    if (line.trim() === '') return;
    let m;
    if ((m = /^([a-z][a-z-]*):\s*(\[\])?$/.exec(line))) {
      current = m[1];
      if (lists[current]) errors.push(`${file}:${i + 1}: list "${current}" appears twice`);
      lists[current] = [];
    } else if ((m = /^\s+-\s+([A-Za-z0-9_.-]+(?:\/[A-Za-z0-9_.-]+)?)$/.exec(line)) && current) {
      lists[current].push({ name: m[1], line: i + 1 });
    } else {
      errors.push(`${file}:${i + 1}: expected a list name ("http:", ...) or "  - scenario-name", got ${JSON.stringify(raw.trim())}`);
    }
  });
  for (const k of Object.keys(lists)) {
    if (!LISTS.includes(k)) errors.push(`${file}: unknown list "${k}" (want one of ${LISTS.join(', ')})`);
  }
  return { lists, errors };
}

function table(rows, header) {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const fmt = (r) => ('  ' + r.map((c, i) => (i === r.length - 1 ? String(c) : String(c).padEnd(widths[i]))).join('  ')).trimEnd();
  console.log(fmt(header));
  for (const r of rows) console.log(fmt(r));
}

function baseline([title, dir, knownFile, scoredFile]) {
  return judgeBaseline({ title, dir, knownFile, scored: readScored(scoredFile), prefix: 'server-', who: 'server' });
}

// clientBaseline judges a run of the client scenarios named against the
// reference client: each must have run and passed.
function clientBaseline([title, dir, knownFile, ...ran]) {
  return judgeBaseline({ title, dir, knownFile, scored: new Set(ran), prefix: '', who: 'client' });
}

// judgeBaseline judges a run against the reference server or client: what
// is judged (scored, a Set, or null for all that ran) must have run and
// passed.
function judgeBaseline({ title, dir, knownFile, scored, prefix, who }) {
  const res = readScenarios(dir, prefix);
  const known = readKnown(knownFile);
  const judged = (name) => !scored || scored.has(name);
  const rows = [];
  let passed = 0, total = 0;
  for (const [name, r] of res) {
    if (judged(name)) {
      total++;
      if (r.pass) passed++;
    }
    const note = judged(name) ? r.reason : 'not scored' + (r.pass ? '' : `  <- ${r.reason}`);
    rows.push([name, r.pass ? 'pass' : 'FAIL', r.counts, r.pass && judged(name) ? '' : note]);
  }
  table(rows, ['scenario', 'result', 'checks', '']);
  const problems = [];
  if (res.size === 0) problems.push('no scenario ran: see conformance.log');
  for (const [name, r] of res) if (!r.pass && judged(name)) problems.push(`${name} fails on the reference ${who} itself`);
  for (const name of scored || []) if (!res.has(name)) problems.push(`${name} did not run: see conformance.log`);
  for (const name of res.keys()) if (!known.has(name)) problems.push(`${name} is not in "conformance list"`);
  console.log(`${title}: ${passed}/${total} scenarios`);
  for (const p of problems) console.log(`  error: ${p}`);
  return problems.length ? 1 : 0;
}

function compare([title, listName, baseDir, gwDir, expectedFile, knownFile, scoredFile]) {
  return judge({ title, listName, baseDir, gwDir, expectedFile, knownFile, scored: readScored(scoredFile), prefix: 'server-', listOnlyScored: true, alone: new Set() });
}

// judge compares a gateway run with its baseline. scored (a Set, or null for
// all) is what is judged, and each of it must have run; prefix is the start
// of the results folders' names; listOnlyScored makes a listed scenario that
// is not scored an error; alone (a Set) are the scenarios without a
// baseline, judged on mcpgw's result alone.
function judge({ title, listName, baseDir, gwDir, expectedFile, knownFile, scored, prefix, listOnlyScored, alone }) {
  const base = readScenarios(baseDir, prefix);
  const gw = readScenarios(gwDir, prefix);
  const known = readKnown(knownFile);
  const { lists, errors } = readExpected(expectedFile);
  const listed = new Map((lists[listName] || []).map((e) => [e.name, e.line]));
  const rel = path.relative(process.cwd(), expectedFile) || expectedFile;

  const problems = [...errors];
  if (!LISTS.includes(listName)) problems.push(`no list "${listName}" (want one of ${LISTS.join(', ')})`);
  for (const [name, line] of listed) {
    if (!known.has(name)) problems.push(`${rel}:${line}: "${name}" is not a conformance scenario`);
    else if (listOnlyScored && scored && !scored.has(name)) problems.push(`${rel}:${line}: "${name}" is not a scored scenario of this run`);
  }

  const names = [...base.keys()];
  for (const n of gw.keys()) if (!base.has(n)) names.push(n);
  for (const n of scored || []) if (!names.includes(n)) names.push(n);
  const rows = [];
  let judged = 0, passed = 0, expected = 0, regressions = 0, stale = 0, baseFails = 0;
  for (const name of names) {
    const b = base.get(name), g = gw.get(name);
    const bs = b ? (b.pass ? 'pass' : 'FAIL') : '-';
    const gs = g ? (g.pass ? 'pass' : 'FAIL') : '-';
    const isListed = listed.has(name);
    const why = g && !g.pass ? `  <- ${g.reason}` : '';
    if (scored && !scored.has(name)) {
      rows.push([name, bs, gs, 'not scored' + why]);
      continue;
    }
    judged++;
    let verdict;
    if (g && g.pass) passed++;
    if (alone.has(name)) {
      if (g && g.pass && isListed) {
        stale++;
        verdict = `PASSES BUT LISTED: remove it from ${rel} (${listName})`;
        problems.push(`${name} passes through mcpgw now: remove it from the ${listName} list in ${rel} (line ${listed.get(name)})`);
      } else if (g && g.pass) {
        verdict = 'ok (no baseline)';
      } else if (isListed) {
        expected++;
        verdict = 'expected failure (no baseline)';
      } else {
        regressions++;
        verdict = 'FAILS (no baseline), NOT LISTED';
        problems.push(`${name} fails through mcpgw and is not in the ${listName} list of ${rel} (it has no baseline: the reference client does not implement it)`);
      }
    } else if (!b || !b.pass) {
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
    rows.push([name, bs, gs, verdict + why]);
  }
  table(rows, ['scenario', 'baseline', 'mcpgw', 'verdict']);
  let summary = `${title}: ${passed}/${judged} scenarios, ${expected} expected failures, ${regressions} regressions`;
  if (stale) summary += `, ${stale} listed but passing`;
  if (baseFails) summary += `, ${baseFails} failing on the baseline`;
  console.log(summary);
  for (const p of problems) console.log(`  error: ${p}`);
  return problems.length ? 1 : 0;
}

// client compares client scenario runs: the same judgement as compare, with
// the list named, results folders named <scenario>-<time>, and the
// scenarios that were run (each must have a result on both sides, except
// those after "--", which have none on the baseline's).
function client([title, listName, baseDir, gwDir, expectedFile, knownFile, ...ran]) {
  const cut = ran.indexOf('--');
  const alone = cut < 0 ? [] : ran.slice(cut + 1);
  const named = cut < 0 ? ran : ran.slice(0, cut);
  return judge({ title, listName, baseDir, gwDir, expectedFile, knownFile, scored: new Set([...named, ...alone]), prefix: '', listOnlyScored: false, alone: new Set(alone) });
}

const [cmd, ...args] = process.argv.slice(2);
const commands = { baseline, compare, client, 'client-baseline': clientBaseline };
if (!Object.hasOwn(commands, cmd)) {
  console.error('usage: report.cjs baseline|compare|client ... (see the comment at the top)');
  process.exit(2);
}
process.exitCode = commands[cmd](args);

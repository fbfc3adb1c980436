// report.test.cjs: tests of report.cjs, the judge of the conformance runs.
// Each case lays out run folders as the suite's CLI writes them and runs
// report.cjs on them. scripts/conformance.sh runs this file first
// (node --test); REPORT_CJS names another report.cjs to test.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const REPORT = process.env.REPORT_CJS || path.join(__dirname, 'report.cjs');

function tmpdir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'report-test-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// run writes a run folder: results maps a scenario to 'pass', 'fail' or
// 'none' (folder without checks.json); prefix starts the folders' names.
function run(dir, name, results, { prefix = 'server-', logged = true } = {}) {
  const d = path.join(dir, name);
  fs.mkdirSync(path.join(d, 'results'), { recursive: true });
  let log = '';
  let i = 0;
  for (const [scenario, r] of Object.entries(results)) {
    if (logged) log += `\n=== Running scenario: ${scenario} ===\n`;
    const folder = path.join(d, 'results', `${prefix}${scenario}-2026-12-07T03-56-1${i++}-097Z`);
    fs.mkdirSync(folder, { recursive: true }); // "auth/x" makes a folder auth
    if (r === 'none') continue;
    const checks = [{ id: 'c1', status: 'SUCCESS' }, { id: 'c2', status: r === 'pass' ? 'WARNING' : 'FAILURE', errorMessage: 'it broke' }];
    fs.writeFileSync(path.join(folder, 'checks.json'), JSON.stringify(checks));
  }
  fs.writeFileSync(path.join(d, 'conformance.log'), log);
  return d;
}

function write(dir, name, text) {
  const f = path.join(dir, name);
  fs.writeFileSync(f, text);
  return f;
}

function report(...args) {
  const r = spawnSync(process.execPath, [REPORT, ...args], { encoding: 'utf8' });
  return { code: r.status, out: r.stdout + r.stderr };
}

const KNOWN = 'Server scenarios (test against a server):\n  - a [2025-11-25]\n  - b\n  - c\n  - ext\n';
const SCORED = 'Required for 2026-07-28 (3 scenarios, frozen; run at the 2026-07-28 wire):\n\n' +
  'Server scenarios (test against a server):\n  - a\n  - b\n  - c\n\nClient scenarios (test against a client):\n  - ext\n';

test('compare: ok, expected failure, regression, listed but passing', (t) => {
  const dir = tmpdir(t);
  const known = write(dir, 'known.txt', KNOWN);
  const base = run(dir, 'base', { a: 'pass', b: 'pass', c: 'pass' });
  const gw = run(dir, 'gw', { a: 'pass', b: 'fail', c: 'fail' });
  const listB = write(dir, 'b.yaml', '# why\nhttp:\n  - b\nstdio: []\n');
  let r = report('compare', 'T', 'http', base, gw, listB, known);
  assert.equal(r.code, 1, r.out);
  assert.match(r.out, /b +pass +FAIL +expected failure {2}<- c2: it broke/);
  assert.match(r.out, /c +pass +FAIL +REGRESSION/);
  assert.match(r.out, /^T: 1\/3 scenarios, 1 expected failures, 1 regressions$/m);

  const listBC = write(dir, 'bc.yaml', 'http:\n  - b\n  - c\n  - a\n');
  r = report('compare', 'T', 'http', base, gw, listBC, known);
  assert.equal(r.code, 1, r.out);
  assert.match(r.out, /a passes through mcpgw now: remove it from the http list in .*bc\.yaml \(line 4\)/);

  const listOK = write(dir, 'ok.yaml', 'http:\n  - b\n  - c\n');
  r = report('compare', 'T', 'http', base, gw, listOK, known);
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /^T: 1\/3 scenarios, 2 expected failures, 0 regressions$/m);
});

test('expected-failures.yaml: the 2026 lists, and what is refused', (t) => {
  const dir = tmpdir(t);
  const known = write(dir, 'known.txt', KNOWN);
  const base = run(dir, 'base', { a: 'pass' });
  const gw = run(dir, 'gw', { a: 'fail' });
  const ok = write(dir, 'ok.yaml', 'http: []\nstdio: []\nmodern-http:\n  # why\n  - a\nmodern-legacy-http: []\nmodern-stdio: []\nclient: []\n');
  let r = report('compare', 'T', 'modern-http', base, gw, ok, known);
  assert.equal(r.code, 0, r.out);

  const cases = [
    ['unknown list', 'moderns:\n  - a\n', /unknown list "moderns"/],
    ['twice', 'http: []\nhttp: []\n', /list "http" appears twice/],
    ['not a scenario', 'modern-http:\n  - a\n  - zz\n', /"zz" is not a conformance scenario/],
    ['flow list', 'modern-http: [a]\n', /expected a list name/],
    ['item without a list', '  - a\n', /expected a list name/],
  ];
  for (const [name, yaml, want] of cases) {
    r = report('compare', 'T', 'modern-http', base, gw, write(dir, `${name}.yaml`, yaml), known);
    assert.equal(r.code, 1, `${name}: ${r.out}`);
    assert.match(r.out, want, name);
  }
  r = report('compare', 'T', 'nope', base, gw, ok, known);
  assert.equal(r.code, 1, r.out);
  assert.match(r.out, /no list "nope"/);
});

test('scored: only the requirement set is judged, and all of it must run', (t) => {
  const dir = tmpdir(t);
  const known = write(dir, 'known.txt', KNOWN);
  const scored = write(dir, 'scored.txt', SCORED);
  const list = write(dir, 'l.yaml', 'modern-http:\n  - b\n');

  // ext is not scored: its failure on the baseline is shown, not judged.
  let base = run(dir, 'base', { a: 'pass', b: 'pass', c: 'pass', ext: 'fail' });
  let r = report('baseline', 'B', base, known, scored);
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /ext +FAIL +1\/2 checks +not scored {2}<- c2: it broke/);
  assert.match(r.out, /^B: 3\/3 scenarios$/m);

  const gw = run(dir, 'gw', { a: 'pass', b: 'fail', c: 'pass', ext: 'fail' });
  r = report('compare', 'G', 'modern-http', base, gw, list, known, scored);
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /^G: 2\/3 scenarios, 1 expected failures, 0 regressions$/m);

  // A scored scenario that did not run fails the baseline and the leg.
  base = run(dir, 'base2', { a: 'pass', b: 'pass' });
  r = report('baseline', 'B', base, known, scored);
  assert.equal(r.code, 1, r.out);
  assert.match(r.out, /c did not run/);
  r = report('compare', 'G', 'modern-http', base, gw, list, known, scored);
  assert.equal(r.code, 1, r.out);
  assert.match(r.out, /c: did not run on the baseline/);

  // A list may name only scored scenarios.
  const bad = write(dir, 'bad.yaml', 'modern-http:\n  - b\n  - ext\n');
  base = run(dir, 'base3', { a: 'pass', b: 'pass', c: 'pass' });
  r = report('compare', 'G', 'modern-http', base, gw, bad, known, scored);
  assert.equal(r.code, 1, r.out);
  assert.match(r.out, /"ext" is not a scored scenario of this run/);
});

test('client: folders without a prefix, and every named scenario must run', (t) => {
  const dir = tmpdir(t);
  const known = write(dir, 'known.txt', 'Client scenarios (test against a client):\n  - initialize [2025-06-18]\n  - tools_call\n  - request-metadata\n');
  const list = write(dir, 'l.yaml', 'client:\n  - request-metadata\n');
  const base = run(dir, 'base', { initialize: 'pass', tools_call: 'pass', 'request-metadata': 'pass' }, { prefix: '', logged: false });
  let gw = run(dir, 'gw', { initialize: 'pass', tools_call: 'pass', 'request-metadata': 'fail' }, { prefix: '', logged: false });
  let r = report('client-baseline', 'CB', base, known, 'initialize', 'tools_call', 'request-metadata');
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /^CB: 3\/3 scenarios$/m);
  r = report('client-baseline', 'CB', gw, known, 'initialize', 'tools_call', 'request-metadata');
  assert.equal(r.code, 1, r.out);
  assert.match(r.out, /request-metadata fails on the reference client itself/);
  r = report('client-baseline', 'CB', base, known, 'initialize', 'sse-retry');
  assert.equal(r.code, 1, r.out);
  assert.match(r.out, /sse-retry did not run/);

  r = report('client', 'C', 'client', base, gw, list, known, 'initialize', 'tools_call', 'request-metadata');
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /^C: 2\/3 scenarios, 1 expected failures, 0 regressions$/m);

  // tools_call left no result through mcpgw: a regression, not a silence.
  gw = run(dir, 'gw2', { initialize: 'pass', 'request-metadata': 'none' }, { prefix: '', logged: false });
  r = report('client', 'C', 'client', base, gw, list, known, 'initialize', 'tools_call', 'request-metadata');
  assert.equal(r.code, 1, r.out);
  assert.match(r.out, /tools_call +pass +- +REGRESSION/);
  assert.match(r.out, /request-metadata +pass +FAIL +expected failure {2}<- no checks\.json/);
});

test('client-auth: scenarios named auth/x, in folders results/auth/, listed with their /', (t) => {
  const dir = tmpdir(t);
  const known = write(dir, 'known.txt', 'Client scenarios (test against a client):\n  - auth/metadata-default [2025-11-25,2026-07-28]\n' +
    '  - auth/iss-supported [2026-07-28]\n  - auth/scope-step-up\n  - auth/client-credentials-basic [extension]\n  - auth/dpop [extension]\n');
  const list = write(dir, 'l.yaml', 'client: []\nclient-auth:\n  # why\n  - auth/iss-supported\n  - auth/dpop\n');
  const opts = { prefix: '', logged: false };
  const base = run(dir, 'base', { 'auth/metadata-default': 'pass', 'auth/iss-supported': 'pass', 'auth/scope-step-up': 'pass' }, opts);
  const gw = run(dir, 'gw', { 'auth/metadata-default': 'pass', 'auth/iss-supported': 'fail', 'auth/scope-step-up': 'pass', 'auth/client-credentials-basic': 'pass', 'auth/dpop': 'fail' }, opts);
  const named = ['auth/metadata-default', 'auth/iss-supported', 'auth/scope-step-up'];
  let r = report('client-baseline', 'CB', base, known, ...named);
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /^CB: 3\/3 scenarios$/m);

  // After "--": no baseline, judged on mcpgw's result alone.
  r = report('client', 'CA', 'client-auth', base, gw, list, known, ...named, '--', 'auth/client-credentials-basic', 'auth/dpop');
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /^CA: 3\/5 scenarios, 2 expected failures, 0 regressions$/m);
  assert.match(r.out, /auth\/client-credentials-basic +- +pass +ok \(no baseline\)/);
  assert.match(r.out, /auth\/dpop +- +FAIL +expected failure \(no baseline\) {2}<- c2: it broke/);

  // Not listed and failing without a baseline: an error; listed and passing: an error.
  const list2 = write(dir, 'l2.yaml', 'client-auth:\n  - auth/iss-supported\n  - auth/client-credentials-basic\n');
  r = report('client', 'CA', 'client-auth', base, gw, list2, known, ...named, '--', 'auth/client-credentials-basic', 'auth/dpop');
  assert.equal(r.code, 1, r.out);
  assert.match(r.out, /auth\/dpop fails through mcpgw and is not in the client-auth list/);
  assert.match(r.out, /auth\/client-credentials-basic passes through mcpgw now: remove it from the client-auth list/);

  // The list "client" does not judge client-auth's scenarios.
  r = report('client', 'C', 'client', base, gw, list, known, ...named);
  assert.equal(r.code, 1, r.out);
  assert.match(r.out, /regression: auth\/iss-supported passes on the baseline but fails through mcpgw, and is not in the client list/);
});

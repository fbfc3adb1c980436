// wait-running.cjs: waits until mcpgw's admin API says a server is running.
//
//   MCPGW_ADMIN_TOKEN=... node wait-running.cjs URL SECONDS [--fail-fast]
//
// URL is mcpgw's /admin/servers/NAME. Prints the server's last status (the
// JSON the admin API gave, or why there was none) and exits 0 once its
// state is "running", or 1 when SECONDS pass first. With --fail-fast it
// also stops, with exit status 3, as soon as the server's start has failed
// (a state of failed, exited, stopped or disabled, or restarting with an
// error): the client scenarios then fail at once instead of at the deadline.
// The token is read from the environment, so it is never on a command line.
'use strict';

const [url, seconds, flag] = process.argv.slice(2);
if (!/^http:\/\/(127\.[0-9.]+|localhost|\[::1\]):[0-9]+\/admin\/servers\/[a-z0-9-]+$/.test(url || '') ||
    !/^[0-9]+$/.test(seconds || '') || (flag !== undefined && flag !== '--fail-fast')) {
  console.error('usage: MCPGW_ADMIN_TOKEN=... node wait-running.cjs http://127.0.0.1:PORT/admin/servers/NAME SECONDS [--fail-fast]');
  process.exit(2);
}
const deadline = Date.now() + Number(seconds) * 1000;
const headers = { authorization: `Bearer ${process.env.MCPGW_ADMIN_TOKEN}` };
const given = new Set(['failed', 'exited', 'stopped', 'disabled']);

(async () => {
  let last = 'no answer';
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url, { headers });
      last = await res.text();
      if (res.ok) {
        const status = JSON.parse(last);
        if (status.state === 'running') {
          console.log(last);
          return;
        }
        if (flag && (given.has(status.state) || (status.state === 'restarting' && status.error))) {
          console.log(last);
          process.exitCode = 3;
          return;
        }
      }
    } catch (err) {
      last = String(err);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  console.log(last);
  process.exitCode = 1;
})();

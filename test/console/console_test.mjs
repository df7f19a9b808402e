// test/console/console_test.mjs: the operator console (shard/console.h) end to end in headless
// Chromium, driven by playwright-core (test/console/README.md). It starts a real fenec-shard and
// two fenec-nodes on loopback ports they pick, registers the nodes and creates tenants through the
// router's API, then proves in the page: it loads asking for the token; a wrong token gets the
// sign-in form again and no data; the right one shows the live cluster's nodes and tenants (the
// oracle: the router's API asked directly), with each node's lease (the nodes take the router's
// leases); a move by its button, cancelled, moves nothing, and
// confirmed, shows the new placement, which the API confirms; a move to another region's node
// names the region (the router refuses it otherwise); and the page goes on reading the
// API about once every 3 s after it; a failover's button asks first;
// the plots draw from /_metrics; signing out drops every value; the page broke no rule of its
// Content-Security-Policy. A screenshot is saved in OUT/console.png.
//
//   node test/console/console_test.mjs <fenec-node> <fenec-shard> <OUT: holds node_modules/>
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import assert from 'node:assert/strict';

const [nodeBin, shardBin, out] = process.argv.slice(2);
if (!nodeBin || !shardBin || !out) {
  console.error('usage: console_test.mjs <fenec-node> <fenec-shard> <dir holding node_modules/>');
  process.exit(2);
}
const require = createRequire(path.resolve(out, 'node_modules') + '/');
const { chromium } = require('playwright-core');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

const ROUTER_TOKEN = 'console-router-secret';
const DATA_TOKEN = 'console-data-secret';
const started = Date.now();
const work = mkdtempSync(path.join(tmpdir(), 'fenec-console-test-'));
const children = [];
let passed = 0;
let failed = 0;

// A process started on 127.0.0.1:0; resolves with its port once its first stdout line names it.
function start(bin, args, name) {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    let line = '';
    const onData = (chunk) => {
      line += chunk.toString();
      const m = /listening=127\.0\.0\.1:(\d+)/.exec(line);
      if (m) { child.stdout.off('data', onData); child.stdout.resume(); resolve(Number(m[1])); }
    };
    child.stdout.on('data', onData);
    child.on('exit', (code) => reject(new Error(`${name} exited ${code} before listening: ${line}`)));
    setTimeout(() => reject(new Error(`${name} did not say where it listens: ${line}`)), 10000);
  });
}

async function api(base, method, target, body, token = ROUTER_TOKEN) {
  const r = await fetch(base + target, {
    method,
    headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, json: text ? JSON.parse(text) : null };
}

async function check(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    passed += 1;
    console.log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    failed += 1;
    console.log(`FAIL ${name}: ${e.stack || e}`);
    throw e;
  }
}

async function main() {
  const nodePorts = [];
  for (const name of ['n1', 'n2', 'n3']) {
    mkdirSync(path.join(work, name), { mode: 0o700 });
    nodePorts.push(await start(nodeBin, [
      '--listen', '127.0.0.1:0', '--data-dir', path.join(work, name), '--node-name', name,
      '--token', DATA_TOKEN, '--admin-token', name + '-admin', '--workers', '1', '--lease'], name));
  }
  const routerPort = await start(shardBin, [
    '--listen', '127.0.0.1:0', '--directory', path.join(work, 'shard.fenec'),
    '--token', ROUTER_TOKEN, '--workers', '1', '--auto-failover', '2'], 'fenec-shard');
  const base = `http://127.0.0.1:${routerPort}`;
  const addr = (i) => `127.0.0.1:${nodePorts[i]}`;
  // n1 and n2 in region eu, n3 alone in us: a move there is a move across regions.
  for (const [i, name, region, zone] of [[0, 'n1', 'eu', 'z1'], [1, 'n2', 'eu', 'z2'],
                                         [2, 'n3', 'us', 'z1']]) {
    const r = await api(base, 'PUT', '/_shard/nodes/' + name,
                        { addr: addr(i), token: name + '-admin', region, zone });
    assert.equal(r.status, 201, JSON.stringify(r.json));
  }
  for (const [tenant, node] of [['acme', 'n1'], ['beta', 'n2'], ['gamma', 'n1']]) {
    const r = await api(base, 'PUT', '/_shard/tenants/' + tenant,
                        { node, schema: ['create collection notes (title text)'] });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    for (let i = 0; i < 5; i += 1) {
      // A tenant's first write waits for its node's first grant naming it (503 until then).
      let w;
      for (let tries = 0; tries < 100; tries += 1) {
        w = await api(base, 'POST', `/t/${tenant}/c/notes`, { title: 'note ' + i }, DATA_TOKEN);
        if (w.status !== 503) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(w.status, 201, JSON.stringify(w.json));
    }
  }
  console.log(`cluster up: router ${base}, nodes ${addr(0)}, ${addr(1)} and ${addr(2)} (${Date.now() - started} ms)`);

  // Reads through the router meanwhile, so the plots have requests to draw.
  let reading = true;
  const reader = (async () => {
    while (reading) {
      await fetch(`${base}/t/beta/c/notes?count`, { headers: { Authorization: 'Bearer ' + DATA_TOKEN } })
        .then((r) => r.text()).catch(() => {});
      await new Promise((r) => setTimeout(r, 20));
    }
  })();

  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true,
                                          args: ['--no-sandbox'] });
  const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
  const problems = [];  // CSP violations, script errors
  page.on('console', (m) => { if (m.type() === 'error') problems.push(m.text()); });
  page.on('pageerror', (e) => problems.push(String(e)));
  const requested = [];
  page.on('request', (r) => requested.push(r.url()));
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`${r.status()} ${new URL(r.url()).pathname}`);
  });
  try {
    await check('the page loads and asks for the token, showing no data', async () => {
      const r = await page.goto(base + '/_console');
      assert.equal(r.status(), 200);
      await page.locator('#sign-in').waitFor({ state: 'visible' });
      assert.equal(await page.locator('#main').isHidden(), true);
    });

    await check('a wrong token gets the sign-in form again and no data', async () => {
      await page.fill('#token', 'not-the-token');
      await page.click('#sign-in-button');
      await page.waitForFunction(() => document.getElementById('sign-in-error').textContent.includes('refused'));
      assert.equal(await page.locator('#sign-in').isVisible(), true);
      assert.equal(await page.locator('#main').isHidden(), true);
      assert.equal(await page.locator('#nodes tbody tr').count(), 0);
      const text = await page.evaluate(() => document.body.innerText);
      for (const secret of ['acme', 'beta', addr(0), addr(1), addr(2)]) {
        assert.ok(!text.includes(secret), `the page shows ${secret} without the token`);
      }
      assert.equal(await page.evaluate(() => sessionStorage.length), 0);
    });

    await check('the right token shows the live cluster\'s nodes and tenants', async () => {
      await page.fill('#token', ROUTER_TOKEN);
      await page.click('#sign-in-button');
      await page.locator('#nodes tbody tr').nth(1).waitFor();
      const nodes = await page.$$eval('#nodes tbody tr', (rows) => rows.map((r) =>
        [...r.cells].map((c) => c.textContent)));
      const apiNodes = (await api(base, 'GET', '/_shard/nodes')).json;
      assert.equal(nodes.length, apiNodes.length);
      for (const [i, n] of apiNodes.entries()) {
        assert.equal(nodes[i][0], n.name);
        assert.equal(nodes[i][1], n.addr);
        assert.equal(nodes[i][2], n.region + ' / ' + n.zone);
        assert.equal(nodes[i][3], 'up');
        assert.equal(nodes[i][5], String(n.tenants));
        assert.match(nodes[i][7], /^\d+(\.\d)? (B|KiB|MiB)$/);
      }
      await page.locator('#tenants tbody tr').nth(2).waitFor();
      const tenants = await page.$$eval('#tenants tbody tr', (rows) => rows.map((r) =>
        [...r.cells].map((c) => c.textContent)));
      const apiTenants = (await api(base, 'GET', '/_shard/tenants')).json;
      assert.deepEqual(tenants.map((t) => [t[0], t[1], t[3]]),
                       apiTenants.map((t) => [t.name, t.node, t.state]));
      for (const t of tenants) assert.match(t[4], /^\d+(\.\d)? (B|KiB|MiB)$/);
      // Both nodes take the router's leases (--lease, --auto-failover 2): each one's age shown.
      const leases = await page.$$eval('#leases tbody tr', (rows) => rows.map((r) =>
        [...r.cells].map((c) => c.textContent)));
      assert.deepEqual(leases.map((l) => [l[0], l[1], l[4]]),
                       [['n1', 'yes', 'no'], ['n2', 'yes', 'no'], ['n3', 'yes', 'no']]);
      for (const l of leases) assert.match(l[2], /^\d+\.\d s$/);
      assert.match(await page.textContent('#lease-summary'), /Lease granted: 2\.0 s/);
      assert.ok(!page.url().includes(ROUTER_TOKEN), 'the token is in the URL');
      assert.ok(!requested.some((u) => u.includes(ROUTER_TOKEN)), 'the token was in a URL asked for');
    });

    await check('the plots draw the data plane from /_metrics', async () => {
      await page.waitForFunction(() => document.querySelector('#plot-rps svg polyline') !== null,
                                 null, { timeout: 15000 });
      const rps = Number(await page.textContent('#plot-rps .value'));
      assert.ok(rps > 0, `requests/s shows ${rps}`);
      assert.ok(await page.locator('#plot-p99 svg').count() === 1);
      assert.equal(await page.textContent('#plot-errors .value'), '0.00');
    });

    await check('a move cancelled moves nothing', async () => {
      const row = page.locator('#tenants tr[data-tenant="acme"]');
      await row.locator('select.move-to').selectOption('n2');
      await row.locator('button.move').click();
      await page.locator('#confirm').waitFor({ state: 'visible' });
      assert.match(await page.textContent('#confirm-text'), /acme moves from n1 to n2/);
      await page.click('#confirm-cancel');
      await page.locator('#confirm').waitFor({ state: 'hidden' });
      await page.waitForTimeout(500);
      assert.equal((await api(base, 'GET', '/_shard/tenants/acme')).json.node, 'n1');
    });

    await check('a move confirmed shows the new placement', async () => {
      const row = page.locator('#tenants tr[data-tenant="acme"]');
      await row.locator('select.move-to').selectOption('n2');
      await row.locator('button.move').click();
      await page.locator('#confirm').waitFor({ state: 'visible' });
      await page.click('#confirm-ok');
      await page.waitForFunction(() => {
        const cell = document.querySelector('#tenants tr[data-tenant="acme"] td.node');
        return cell && cell.textContent === 'n2';
      }, null, { timeout: 15000 });
      assert.match(await page.textContent('#notice'), /acme moved from n1 to n2 in \d+ ms/);
      assert.equal((await api(base, 'GET', '/_shard/tenants/acme')).json.node, 'n2');
      // n2 holds beta and acme now, in the nodes' table too.
      await page.waitForFunction(() =>
        document.querySelectorAll('#nodes tr[data-node="n2"] td')[5]?.textContent === '2');
    });

    await check('a move to a node of another region names the region', async () => {
      const row = page.locator('#tenants tr[data-tenant="gamma"]');
      assert.deepEqual(await row.locator('select.move-to option').allTextContents(), ['n2', 'n3 (us)']);
      await row.locator('select.move-to').selectOption('n3');
      await row.locator('button.move').click();
      await page.locator('#confirm').waitFor({ state: 'visible' });
      assert.match(await page.textContent('#confirm-text'),
                   /gamma moves from n1 to n3, out of region eu into region us/);
      await page.click('#confirm-ok');
      await page.waitForFunction(() => {
        const cell = document.querySelector('#tenants tr[data-tenant="gamma"] td.node');
        return cell && cell.textContent === 'n3';
      }, null, { timeout: 15000 });
      assert.match(await page.textContent('#notice'), /gamma moved from n1 to n3 in \d+ ms, now in region us/);
      const row2 = (await api(base, 'GET', '/_shard/tenants/gamma')).json;
      assert.equal(row2.node, 'n3');
      assert.equal(row2.region, 'us');
    });

    await check('the page reads the API about once every 3 s after an action', async () => {
      const reads = () => requested.filter((u) => u.endsWith('/_shard/status')).length;
      const before = reads();
      await page.waitForTimeout(7000);
      const n = reads() - before;
      assert.ok(n >= 2 && n <= 3, `${n} reads of /_shard/status in 7 s`);
    });

    await check('a failover asks first; cancelled, nothing fails over', async () => {
      await page.locator('#nodes tr[data-node="n2"] button.failover').click();
      await page.locator('#confirm').waitFor({ state: 'visible' });
      assert.match(await page.textContent('#confirm-title'), /Fail n2 over\?/);
      await page.click('#confirm-cancel');
      await page.locator('#confirm').waitFor({ state: 'hidden' });
      const status = (await api(base, 'GET', '/_shard/status')).json;
      assert.deepEqual(status.failovers, []);
      assert.equal((await api(base, 'GET', '/_shard/tenants/acme')).json.node, 'n2');
    });

    await page.screenshot({ path: path.join(out, 'console.png'), fullPage: true });
    console.log(`screenshot: ${path.join(out, 'console.png')}`);

    await check('signing out drops every value shown', async () => {
      await page.click('#sign-out');
      await page.locator('#sign-in').waitFor({ state: 'visible' });
      assert.equal(await page.locator('#main').isHidden(), true);
      assert.equal(await page.locator('main tbody tr').count(), 0);
      assert.equal(await page.evaluate(() => sessionStorage.length), 0);
    });

    await check('the page broke no rule of its policy and threw nothing', async () => {
      // The 401s of the wrong token are expected (Chromium logs each): nothing else is.
      const others = problems.filter((p) => !/status of 401/.test(p) && !/^401 \/_shard\/nodes$/.test(p));
      assert.deepEqual(others, []);
    });
  } catch (e) {
    await page.screenshot({ path: path.join(out, 'console-failed.png'), fullPage: true }).catch(() => {});
    console.log(`screenshot of the failure: ${path.join(out, 'console-failed.png')}`);
  } finally {
    reading = false;
    await reader;
    await browser.close();
  }
}

try {
  await main();
} catch (e) {
  if (failed === 0) { failed += 1; console.log(`FAIL setting up: ${e.stack || e}`); }
} finally {
  // The router first, so it does not see the nodes go and fail them over as it stops.
  for (const c of children.reverse()) {
    if (c.exitCode !== null) continue;
    c.kill('SIGTERM');
    await new Promise((r) => { c.on('exit', r); setTimeout(() => { c.kill('SIGKILL'); r(); }, 12000); });
  }
  rmSync(work, { recursive: true, force: true });
}
console.log(`console-test took ${((Date.now() - started) / 1000).toFixed(1)} s`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);

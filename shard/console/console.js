// shard/console/console.js: the operator console's script (shard/console.h). It asks for the
// router's --token, keeps it in this tab's sessionStorage (never in a URL), and every few seconds
// reads the router's API with it: GET /_shard/nodes, /_shard/tenants, /_shard/status and
// /_metrics. A 401 from any of them forgets the token and shows the sign-in form again, with no
// data left on the page. Every value from the API enters the page as text (textContent, SVG
// attributes), never as markup. Actions (a tenant moved, a node failed over) each ask first in a
// dialog.
'use strict';

(() => {
  const TOKEN_KEY = 'fenec-console-token';
  const REFRESH_MS = 3000;
  const SAMPLES_MAX = 60;  // points on each plot: three minutes at one a refresh
  const DATA_ROUTES = new Set(['tenant', 'query']);  // the console's own reads are not plotted
  const MOVE_STEPS = ['starting', 'marked', 'frozen', 'installed', 'flipped'];
  const SVG = 'http://www.w3.org/2000/svg';

  const $ = (id) => document.getElementById(id);
  let token = sessionStorage.getItem(TOKEN_KEY);
  let timer = null;
  let generation = 0;  // bumped at sign-out, so a refresh in flight renders nothing after it
  let last = null;     // the last metrics sample: {at, requests, errors, buckets}
  const series = { rps: [], p99: [], errors: [] };
  const chosen = new Map();  // tenant -> the node picked in its "move to" list
  const regionOf = new Map();  // node -> its region ('' for none), as the last refresh read them

  class Refused extends Error {}

  // ---- DOM helpers: text only.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else e.setAttribute(k, v);
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }
  function svg(tag, attrs) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    return e;
  }
  // A table without rows is hidden, so an empty one shows no headers under its "None".
  function fill(tbody, rows) {
    tbody.replaceChildren(...rows);
    tbody.parentElement.hidden = rows.length === 0;
  }
  function td(value, cls) { return el('td', cls ? { class: cls } : {}, value); }

  function bytes(n) {
    if (n === undefined || n === null) return '—';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let u = 0;
    let v = n;
    while (v >= 1024 && u < units.length - 1) { v /= 1024; u += 1; }
    return (u === 0 ? String(v) : v.toFixed(1)) + ' ' + units[u];
  }
  function seconds(ms) { return (ms / 1000).toFixed(1) + ' s'; }
  function number(v) {
    if (v === null || v === undefined || !Number.isFinite(v)) return '—';
    return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
  }

  // ---- The API.
  async function call(method, path, body) {
    const init = { method, cache: 'no-store', credentials: 'omit', redirect: 'error',
                   headers: { Authorization: 'Bearer ' + token } };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const r = await fetch(path, init);
    if (r.status === 401) throw new Refused('the router refused this token');
    const text = await r.text();
    let json = null;
    if ((r.headers.get('Content-Type') || '').startsWith('application/json') && text) {
      json = JSON.parse(text);
    }
    return { status: r.status, json, text };
  }
  async function read(path) {
    const r = await call('GET', path);
    if (r.status !== 200) {
      throw new Error(path + ' answered ' + r.status + (r.json && r.json.error ? ': ' + r.json.error : ''));
    }
    return r;
  }

  // ---- Prometheus text: the router's request counters and durations of the data plane.
  function parseMetrics(text) {
    const out = { requests: 0, errors: 0, buckets: new Map() };
    for (const line of text.split('\n')) {
      if (!line || line[0] === '#') continue;
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)/.exec(line);
      if (!m) continue;
      const [, name, labelText, valueText] = m;
      if (name !== 'fenec_router_requests_total' &&
          name !== 'fenec_router_request_duration_seconds_bucket') continue;
      const labels = {};
      for (const l of (labelText || '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
        labels[l[1]] = l[2];
      }
      if (!DATA_ROUTES.has(labels.route)) continue;
      const value = Number(valueText);
      if (name === 'fenec_router_requests_total') {
        out.requests += value;
        if (labels.code === '5xx') out.errors += value;
      } else {
        const le = labels.le === '+Inf' ? Infinity : Number(labels.le);
        out.buckets.set(le, (out.buckets.get(le) || 0) + value);
      }
    }
    return out;
  }

  // The 0.99 quantile of the requests between two samples, in ms, interpolated within its
  // bucket as Prometheus's histogram_quantile does; null when none came.
  function p99(before, now) {
    const les = [...now.buckets.keys()].sort((a, b) => a - b);
    const counts = les.map((le) => now.buckets.get(le) - (before.buckets.get(le) || 0));
    const total = counts.length ? counts[counts.length - 1] : 0;
    if (total <= 0) return null;
    const rank = 0.99 * total;
    for (let i = 0; i < les.length; i += 1) {
      if (counts[i] >= rank) {
        const upper = les[i];
        const lower = i === 0 ? 0 : les[i - 1];
        if (upper === Infinity) return lower * 1000;
        const below = i === 0 ? 0 : counts[i - 1];
        const within = counts[i] - below;
        const share = within > 0 ? (rank - below) / within : 1;
        return (lower + (upper - lower) * share) * 1000;
      }
    }
    return null;
  }

  function sample(metricsText) {
    const now = { at: performance.now(), ...parseMetrics(metricsText) };
    if (last && now.requests >= last.requests) {
      const dt = (now.at - last.at) / 1000;
      push('rps', (now.requests - last.requests) / dt);
      push('errors', (now.errors - last.errors) / dt);
      push('p99', p99(last, now));
    }
    last = now;
  }
  function push(name, v) {
    series[name].push(v);
    if (series[name].length > SAMPLES_MAX) series[name].shift();
  }

  function plot(id, values) {
    const fig = $(id);
    const w = 240;
    const h = 70;
    const known = values.filter((v) => v !== null && Number.isFinite(v));
    const top = Math.max(1e-9, ...known) * 1.15;
    const s = svg('svg', { viewBox: `0 0 ${w} ${h}`, preserveAspectRatio: 'none', role: 'img' });
    s.append(svg('line', { x1: 0, y1: h - 0.5, x2: w, y2: h - 0.5, stroke: '#e3e6ec' }));
    const step = w / (SAMPLES_MAX - 1);
    const x0 = w - (values.length - 1) * step;
    let points = [];
    const flush = () => {
      if (points.length > 1) {
        s.append(svg('polyline', { points: points.join(' '), fill: 'none', stroke: '#2f6fdf',
                                   'stroke-width': 1.5, 'vector-effect': 'non-scaling-stroke' }));
      } else if (points.length === 1) {
        const [x, y] = points[0].split(',');
        s.append(svg('circle', { cx: x, cy: y, r: 1.5, fill: '#2f6fdf' }));
      }
      points = [];
    };
    values.forEach((v, i) => {
      if (v === null || !Number.isFinite(v)) { flush(); return; }
      points.push(`${(x0 + i * step).toFixed(1)},${(h - 2 - (v / top) * (h - 6)).toFixed(1)}`);
    });
    flush();
    const title = svg('title', {});
    title.textContent = 'max ' + number(known.length ? Math.max(...known) : null);
    s.append(title);
    fig.querySelector('svg')?.remove();
    fig.append(s);
    fig.querySelector('.value').textContent = number(values.length ? values[values.length - 1] : null);
  }

  // ---- Rendering.
  function renderNodes(nodes, status) {
    const probe = new Map(status.nodes.map((n) => [n.name, n]));
    fill($('nodes').tBodies[0], nodes.map((n) => {
      const p = probe.get(n.name) || {};
      let state = el('span', { class: p.answered ? 'up' : 'down', text: p.answered ? 'up' : 'down' });
      if (!p.answered && p.error) state.title = p.error;
      if (n.lease && n.lease.failed_over) state = el('span', { class: 'down', text: 'failed over' });
      const role = n.standby_of ? ' (standby of ' + n.standby_of + ')' : '';
      const button = el('button', { type: 'button', class: 'failover', 'data-node': n.name,
                                    text: 'Fail over' });
      button.addEventListener('click', () => failOver(n.name));
      return el('tr', { 'data-node': n.name },
        td(n.name + role), td(n.addr), td([n.region, n.zone].filter(Boolean).join(' / ') || '—'),
        td(state), td(n.lease ? seconds(n.lease.age_ms) : '—'),
        td(n.tenants, 'num'), td(n.replicas, 'num'), td(bytes(p.bytes), 'num'),
        td(button));
    }));
  }

  function renderTenants(tenants, nodes, status) {
    const body = $('tenants').tBodies[0];
    // A list the operator has open is not pulled from under them: this table waits a refresh.
    if (body.contains(document.activeElement) && document.activeElement.tagName === 'SELECT') return;
    const sizes = new Map(status.tenants.map((t) => [t.name, t.bytes]));
    // Not offered: a standby, and a node failed over and not heard from since (a move there
    // waits out the router's --upstream-timeout, then is refused).
    const unoffered = new Set(nodes.filter((n) => n.standby_of || (n.lease && n.lease.failed_over))
      .map((n) => n.name));
    regionOf.clear();
    for (const n of nodes) regionOf.set(n.name, n.region || '');
    fill(body, tenants.map((t) => {
      const targets = nodes.map((n) => n.name).filter((n) => n !== t.node && !unoffered.has(n));
      // A node of another region is named with it: moving there is a move across regions.
      const label = (n) => regionOf.get(n) !== regionOf.get(t.node) && regionOf.get(n)
        ? n + ' (' + regionOf.get(n) + ')' : n;
      const select = el('select', { class: 'move-to', 'aria-label': 'move ' + t.name + ' to' },
        ...targets.map((n) => el('option', { value: n, text: label(n) })));
      if (targets.includes(chosen.get(t.name))) select.value = chosen.get(t.name);
      select.addEventListener('change', () => chosen.set(t.name, select.value));
      const button = el('button', { type: 'button', class: 'move', text: 'Move' });
      button.disabled = targets.length === 0 || t.state === 'moving';
      button.addEventListener('click', () => move(t.name, t.node, select.value));
      return el('tr', { 'data-tenant': t.name },
        td(t.name), td(t.node, 'node'), td(t.replica || '—'),
        td(t.state, t.state === 'active' ? '' : 'warn'), td(bytes(sizes.get(t.name)), 'num'),
        td(el('span', { class: 'row-actions' }, select, button)));
    }));
  }

  function renderMoves(moves) {
    fill($('moves').tBodies[0], moves.map((m) => {
      const at = MOVE_STEPS.indexOf(m.step);
      const steps = el('span', { class: 'steps' }, ...MOVE_STEPS.map((s, i) =>
        el('span', { class: 'step' + (i < at ? ' done' : i === at ? ' now' : ''), text: s })));
      if (m.step === 'stopped') {
        steps.replaceChildren(el('span', { class: 'step stopped', text: 'stopped: move it again' }));
      }
      return el('tr', { 'data-tenant': m.tenant }, td(m.tenant), td(m.from), td(m.to || '—'),
                td(steps));
    }));
    $('moves-none').hidden = moves.length > 0;
  }

  function renderLeases(nodes, status) {
    const lease = status.lease;
    const summary = $('lease-summary');
    if (!lease) {
      summary.textContent = 'No leases: this router runs without --auto-failover, and no ' +
                            'router has leased from its directory.';
    } else {
      summary.textContent = (lease.ms ? 'Lease granted: ' + seconds(lease.ms) : 'No lease granted here') +
                            (lease.record_ms ? ' · longest recorded: ' + seconds(lease.record_ms) : '');
    }
    const leased = nodes.filter((n) => n.lease);
    fill($('leases').tBodies[0], leased.map((n) => {
      const share = lease && lease.ms ? Math.min(1, n.lease.age_ms / lease.ms) : 0;
      const meter = svg('svg', { class: 'meter', viewBox: '0 0 90 8', role: 'img' });
      meter.append(svg('rect', { x: 0, y: 0, width: 90, height: 8, rx: 4, fill: '#f6f7f9' }));
      meter.append(svg('rect', { x: 0, y: 0, width: (90 * share).toFixed(1), height: 8, rx: 4,
                                 fill: share > 0.66 ? '#b26a00' : '#1a7f4b' }));
      return el('tr', {}, td(n.name), td(n.lease.takes ? 'yes' : 'no'), td(seconds(n.lease.age_ms)),
                td(meter), td(n.lease.failed_over ? 'yes' : 'no', n.lease.failed_over ? 'down' : ''));
    }));
  }

  function renderFailovers(failovers) {
    const pairs = (list, sep) => list.map((p) => p.tenant + sep + (p.to || p.why || p.held_by)).join(', ') || '—';
    fill($('failovers').tBodies[0], failovers.slice().reverse().map((f) => el('tr', {},
      td(new Date(f.at).toLocaleString()), td(f.node), td(f.trigger),
      td(pairs(f.promoted, ' → ')), td(pairs(f.failed, ': '), f.failed.length ? 'down' : ''),
      td(pairs(f.waiting, ' held by ')))));
    $('failovers-none').hidden = failovers.length > 0;
  }

  // ---- The loop: one refresh at a time; one asked for meanwhile (an action's) runs right after.
  let refreshing = false;
  let again = false;
  async function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    clearTimeout(timer);
    const mine = generation;
    try {
      await load(mine);
    } finally {
      refreshing = false;
    }
    if (again) { again = false; refresh(); return; }
    if (mine === generation && token) timer = setTimeout(refresh, REFRESH_MS);
  }

  async function load(mine) {
    try {
      const [nodes, tenants, status, metrics] = await Promise.all([
        read('/_shard/nodes'), read('/_shard/tenants'), read('/_shard/status'), read('/_metrics')]);
      if (mine !== generation) return;
      showMain();
      $('role').textContent = status.json.role + ' · term ' + status.json.term;
      $('updated').textContent = 'updated ' + new Date(status.json.at).toLocaleTimeString();
      renderNodes(nodes.json, status.json);
      renderTenants(tenants.json, nodes.json, status.json);
      renderMoves(status.json.moves);
      renderLeases(nodes.json, status.json);
      renderFailovers(status.json.failovers);
      sample(metrics.text);
      plot('plot-rps', series.rps);
      plot('plot-p99', series.p99);
      plot('plot-errors', series.errors);
      problem('');
    } catch (e) {
      if (mine !== generation) return;
      if (e instanceof Refused) { signOut('The router refused this token.'); return; }
      problem('The router did not answer as it should: ' + e.message);
    }
  }

  function problem(text) { $('problem').textContent = text; $('problem').hidden = !text; }
  function notice(text, bad) {
    const n = $('notice');
    n.textContent = text;
    n.className = (bad ? 'error' : 'notice') + ' banner';
    n.hidden = !text;
  }

  function showMain() {
    $('sign-in').hidden = true;
    $('main').hidden = false;
    $('sign-out').hidden = false;
  }

  // Forgets the token and every value shown: the sign-in form, and nothing else.
  function signOut(why) {
    generation += 1;
    clearTimeout(timer);
    again = false;
    token = null;
    sessionStorage.removeItem(TOKEN_KEY);
    for (const t of document.querySelectorAll('main tbody')) t.replaceChildren();
    for (const f of document.querySelectorAll('.plot')) { f.querySelector('svg')?.remove(); f.querySelector('.value').textContent = ''; }
    for (const k of Object.keys(series)) series[k] = [];
    last = null;
    chosen.clear();
    $('role').textContent = '';
    $('updated').textContent = '';
    $('lease-summary').textContent = '';
    problem('');
    notice('');
    $('main').hidden = true;
    $('sign-out').hidden = true;
    $('sign-in').hidden = false;
    $('sign-in-error').textContent = why || '';
    $('token').value = '';
    $('token').focus();
  }

  // ---- Actions, each confirmed first.
  function confirmAction(title, text, ok) {
    const d = $('confirm');
    $('confirm-title').textContent = title;
    $('confirm-text').textContent = text;
    $('confirm-ok').textContent = ok;
    return new Promise((resolve) => {
      const done = (answer) => {
        $('confirm-ok').onclick = null;
        $('confirm-cancel').onclick = null;
        d.oncancel = null;
        if (d.open) d.close();
        resolve(answer);
      };
      $('confirm-ok').onclick = () => done(true);
      $('confirm-cancel').onclick = () => done(false);
      d.oncancel = (e) => { e.preventDefault(); done(false); };
      d.showModal();
    });
  }

  async function act(what, method, path, body, describe) {
    notice(what + '…');
    try {
      const r = await call(method, path, body);
      if (r.status >= 200 && r.status < 300) notice(describe(r.json));
      else notice(what + ' failed (' + r.status + '): ' + ((r.json && r.json.error) || r.text), true);
    } catch (e) {
      if (e instanceof Refused) { signOut('The router refused this token.'); return; }
      notice(what + ' failed: ' + e.message, true);
    }
    refresh();
  }

  // A move to a node of another region names that region too (the router refuses it otherwise,
  // 409): its replica is then placed again there.
  async function move(tenant, from, to) {
    if (!to) return;
    const region = regionOf.get(to) || '';
    const across = region !== (regionOf.get(from) || '');
    const ok = await confirmAction('Move ' + tenant + '?',
      'Tenant ' + tenant + ' moves from ' + from + ' to ' + to +
      (across ? ', out of ' + (regionOf.get(from) ? 'region ' + regionOf.get(from) : 'the unnamed region') +
                ' into ' + (region ? 'region ' + region : 'the unnamed region') : '') +
      '. Its writes pause while it is frozen and its image is copied.', 'Move to ' + to);
    if (!ok) return;
    await act('Moving ' + tenant + ' to ' + to, 'POST',
              '/_shard/tenants/' + encodeURIComponent(tenant) + '/move',
              across ? { to, region } : { to },
              (j) => tenant + ' moved from ' + j.from + ' to ' + j.to + ' in ' + j.ms + ' ms' +
                     (across && j.region !== undefined ? ', now in region ' + j.region : '') +
                     (j.unreplicated ? ' (unreplicated: ' + j.unreplicated + ')' : ''));
  }

  async function failOver(node) {
    const ok = await confirmAction('Fail ' + node + ' over?',
      'Each tenant on ' + node + ' is promoted on its copy, and the router points it there. ' +
      'Do this only for a node that is down or cut off.', 'Fail ' + node + ' over');
    if (!ok) return;
    await act('Failing ' + node + ' over', 'POST',
              '/_shard/nodes/' + encodeURIComponent(node) + '/failover', {},
              (j) => node + ' failed over: ' + j.promoted.length + ' promoted, ' +
                     j.failed.length + ' failed, ' + j.waiting.length + ' waiting');
  }

  // ---- Start.
  async function signIn(event) {
    event.preventDefault();
    const typed = $('token').value;
    if (!typed) return;
    $('sign-in-button').disabled = true;
    $('sign-in-error').textContent = '';
    token = typed;
    try {
      await read('/_shard/nodes');
      sessionStorage.setItem(TOKEN_KEY, token);
      $('token').value = '';
      generation += 1;
      refresh();
    } catch (e) {
      token = null;
      $('sign-in-error').textContent = e instanceof Refused ? 'The router refused this token.'
                                                             : 'The router did not answer: ' + e.message;
    } finally {
      $('sign-in-button').disabled = false;
    }
  }

  $('sign-in-form').addEventListener('submit', signIn);
  $('sign-out').addEventListener('click', () => signOut(''));
  if (token) {
    refresh();
  } else {
    signOut('');
  }
})();

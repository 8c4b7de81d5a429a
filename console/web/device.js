'use strict';
// The device page: card, state, live signals, settings, actions and jobs,
// lease, receipts, and the estop. Every call goes through /rpc like any
// other client's, so the device's gates decide.
(() => {
  const { rpc, el, notice, describeError, fmt, sleep, RPCError } = MHP;
  const $ = (id) => document.getElementById(id);
  const STALE_S = 10;      // a signal value older than this is shown stale
  const SPARK = 60;        // points kept per signal
  const MAX_JOBS = 20;     // recent jobs kept on the page

  const st = {
    desc: null,
    state: '',
    backend: null,
    reachable: true,
    signals: new Map(),  // name -> {spec, row, value, history[], seenAt (ms), valueTS}
    settings: new Map(), // name -> {spec, row}
    jobs: new Map(),     // id -> {job, row}
    leased: false,
    leaseTimer: 0,
    streamAbort: null,
    streamGen: 0,
    evidence: true,
  };

  // ---- state ----
  function setState(s) {
    if (!s) return;
    st.state = s;
    const box = $('state');
    box.textContent = s;
    box.dataset.state = s;
    box.className = 'state ' + s;
    $('reset').hidden = !(s === 'estop' || s === 'fault');
    renderBanner();
  }

  function renderBanner(faultReason) {
    const b = $('banner');
    let text = '';
    let warn = false;
    if (!st.reachable) text = 'The server does not answer: the values shown are old. Retrying…';
    else if (st.backend && st.backend.connected === false) {
      text = 'Backend unreachable: ' + (st.backend.error || 'the driver lost its link to the instrument') + '. Signals read unavailable; writes and invokes are refused.';
    } else if (st.state === 'estop') text = 'EMERGENCY STOP is active. Make the instrument safe, then Reset.';
    else if (st.state === 'fault') { text = 'FAULT: ' + (faultReason || st.faultReason || 'see the device') + '. Reset when resolved.'; warn = true; }
    b.hidden = !text;
    b.textContent = text;
    b.className = 'banner' + (warn ? ' warn' : '');
  }

  // ---- card ----
  function renderCard(d) {
    document.title = d.id + ' · MHP';
    $('dev-id').textContent = d.id;
    const bits = [d.class, [d.make, d.model].filter(Boolean).join(' '), d.location].filter(Boolean);
    $('dev-card').textContent = bits.join(' · ');
  }

  // ---- signals ----
  function sparkline(hist) {
    const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    svg.setAttribute('class', 'spark');
    svg.setAttribute('viewBox', '0 0 120 24');
    const nums = hist.filter((v) => typeof v === 'number');
    if (nums.length > 1) {
      const lo = Math.min(...nums), hi = Math.max(...nums), span = hi - lo || 1;
      const pts = nums.map((v, i) => (i * 120 / (nums.length - 1)).toFixed(1) + ',' + (22 - (v - lo) * 20 / span).toFixed(1));
      const pl = document.createElementNS('http://www.w3.org/2000/svg', 'polyline');
      pl.setAttribute('points', pts.join(' '));
      svg.append(pl);
    }
    return svg;
  }

  function renderSignals(specs) {
    const body = $('signals').querySelector('tbody');
    body.replaceChildren();
    st.signals.clear();
    for (const s of specs || []) {
      const row = el('tr', { 'data-signal': s.name },
        el('td', { title: s.notes || '' }, s.name),
        el('td', { class: 'value' }, '—'),
        el('td', { class: 'trend' }),
        el('td', { class: 'age' }, ''));
      body.append(row);
      st.signals.set(s.name, { spec: s, row, value: undefined, history: [], seenAt: 0, why: '' });
    }
  }

  function signalValue(name, value, at) {
    const s = st.signals.get(name);
    if (!s) return;
    const changed = s.value !== value;
    s.value = value;
    s.seenAt = at || Date.now();
    s.why = '';
    s.row.querySelector('.value').textContent = fmt(value, s.spec.unit);
    s.row.dataset.value = typeof value === 'object' ? JSON.stringify(value) : String(value);
    if (changed || s.history.length === 0) {
      s.history.push(value);
      if (s.history.length > SPARK) s.history.shift();
      if (typeof value === 'number') s.row.querySelector('.trend').replaceChildren(sparkline(s.history));
    }
    ageSignals();
  }

  function ageSignals() {
    const now = Date.now();
    for (const s of st.signals.values()) {
      const age = s.seenAt ? (now - s.seenAt) / 1000 : Infinity;
      const stale = !!s.why || age > STALE_S;
      s.row.classList.toggle('stale', stale);
      s.row.dataset.stale = stale ? 'true' : 'false';
      s.row.querySelector('.age').textContent = s.why ? 'unavailable: ' + s.why : !s.seenAt ? 'no value yet' : stale ? 'stale ' + Math.round(age) + ' s' : Math.round(age) + ' s';
    }
  }

  async function readSignals() {
    if (st.signals.size === 0) return;
    const r = await rpc('signals/read', { names: [] });
    // The value's own time when the backend gave one, else the read's: an
    // old source timestamp shows as stale even when the read succeeded.
    const skew = Date.now() - r.ts * 1000;
    for (const [name, v] of Object.entries(r.values || {})) {
      const t = r.times && r.times[name] ? r.times[name] * 1000 + skew : Date.now();
      if (r.unavailable && r.unavailable[name]) {
        const s = st.signals.get(name);
        if (s) s.why = r.unavailable[name];
        continue;
      }
      signalValue(name, v, t);
    }
    ageSignals();
  }

  // ---- settings ----
  function limitsText(l) {
    const enumv = l && l.enum;
    if (enumv && enumv.length) return 'one of ' + enumv.join(', ');
    if (!l) return '';
    const parts = [];
    if (l.min !== undefined && l.max !== undefined) parts.push(l.min + ' … ' + l.max);
    else if (l.min !== undefined) parts.push('≥ ' + l.min);
    else if (l.max !== undefined) parts.push('≤ ' + l.max);
    if (l.step !== undefined) parts.push('step ' + l.step);
        return parts.join(', ');
  }

  function inputFor(s) {
    if (s.type === 'boolean') return el('select', { class: 'nv' }, el('option', { value: 'true' }, 'true'), el('option', { value: 'false' }, 'false'));
    const lim = s.limits || {};
    if (s.type === 'number' || s.type === 'integer') return el('input', { class: 'nv', type: 'number', step: s.type === 'integer' ? 1 : 'any', min: lim.min, max: lim.max });
    return el('input', { class: 'nv', type: 'text' });
  }

  function parseInput(s, raw) {
    if (s.type === 'boolean') return raw === 'true';
    if (s.type === 'number' || s.type === 'integer') {
      if (raw.trim() === '') throw new Error('enter a value for ' + s.name);
      return Number(raw);
    }
    if (s.type === 'string') return raw;
    try { return JSON.parse(raw); } catch (e) { throw new Error(s.name + ': not JSON: ' + e.message); }
  }

  function renderSettings(specs) {
    const body = $('settings').querySelector('tbody');
    body.replaceChildren();
    st.settings.clear();
    for (const s of specs || []) {
      const input = inputFor(s);
      const forbid = s.approval === 'forbid';
      const btn = el('button', { class: 'btn set', disabled: forbid, title: forbid ? 'forbidden through MHP' : '' }, 'Set');
      const row = el('tr', { 'data-setting': s.name },
        el('td', { title: s.notes || '' }, s.name, s.unit ? el('span', { class: 'muted' }, ' (' + s.unit + ')') : null),
        el('td', { class: 'cur value' }, '—'),
        el('td', {}, limitsText(s.limits), s.interlocks && s.interlocks.length ? el('div', { class: 'muted' }, 'interlocks: ' + s.interlocks.join(', ')) : null),
        el('td', { class: 'approval' }, s.approval || 'auto'),
        el('td', { class: 'needs-write' }, input, ' ', btn));
      btn.addEventListener('click', () => guarded('write', s.name, s.approval, fmt(input.value, s.unit), async (approved) => {
        const value = parseInput(s, input.value);
        const r = await rpc('settings/write', { name: s.name, value, approved: approved || undefined });
        notice('wrote ' + s.name + ' = ' + fmt(r.value, s.unit) + (r.applied ? ' (applied)' : ' (sent, not confirmed)'), 'ok');
        row.querySelector('.cur').textContent = fmt(r.value, s.unit);
      }));
      body.append(row);
      st.settings.set(s.name, { spec: s, row });
    }
  }

  // ---- approval and gates ----
  function confirmDialog(text) {
    const dlg = $('confirm');
    $('confirm-text').textContent = text;
    return new Promise((resolve) => {
      dlg.addEventListener('close', () => {
        // A modal dialog makes the page behind it inert: its own E-STOP stops from here.
        if (dlg.returnValue === 'estop') estop();
        resolve(dlg.returnValue === 'yes');
      }, { once: true });
      dlg.returnValue = '';
      dlg.showModal();
    });
  }

  // guarded runs call(approved): a confirm-level item asks the person first
  // and then sends approved:true; a refusal is shown with its gate and why.
  async function guarded(kind, name, approval, detail, call) {
    if (approval === 'forbid') {
      notice(kind + ' ' + name + ' is forbidden through MHP', 'error');
      return;
    }
    let approved = false;
    if (approval === 'confirm') {
      approved = await confirmDialog(kind + ' ' + name + (detail ? ' (' + detail + ')' : '') + ' on ' + st.desc.id + '?');
      if (!approved) { notice(kind + ' ' + name + ': not approved, nothing sent'); return; }
    }
    try {
      await call(approved);
    } catch (e) {
      if (e instanceof RPCError && e.data && e.data.approval === 'confirm' && !approved) {
        if (await confirmDialog(kind + ' ' + name + ' needs approval now: ' + e.message)) {
          try { await call(true); } catch (e2) { notice(kind + ' ' + name + ' refused: ' + describeError(e2), 'error'); }
        }
        return;
      }
      let text = kind + ' ' + name + ' refused: ' + describeError(e);
      if (e instanceof RPCError && e.data && e.data.gate === 'lease' && !st.leased) text += ' — press “Take control” first.';
      notice(text, 'error');
    }
    refreshReceipts();
  }

  // ---- actions and jobs ----
  function renderActions(specs) {
    const body = $('actions').querySelector('tbody');
    body.replaceChildren();
    for (const a of specs || []) {
      const ex = a.examples && a.examples.length ? a.examples[0] : {};
      const params = el('textarea', { class: 'params', rows: Object.keys(ex).length ? 3 : 1, spellcheck: 'false' });
      params.value = JSON.stringify(ex);
      const forbid = a.approval === 'forbid';
      const btn = el('button', { class: 'btn run', disabled: forbid }, 'Run');
      const pnames = Object.keys(a.params || {}).join(', ');
      body.append(el('tr', { 'data-action': a.name },
        el('td', { title: a.notes || '' }, a.name, el('div', { class: 'muted' }, [a.duration, pnames].filter(Boolean).join(' · '))),
        el('td', { class: 'approval' }, a.approval || 'auto'),
        el('td', { class: 'needs-write' }, params),
        el('td', { class: 'needs-write' }, btn)));
      btn.addEventListener('click', () => guarded('invoke', a.name, a.approval, params.value === '{}' ? '' : params.value, async (approved) => {
        let p;
        try { p = JSON.parse(params.value || '{}'); } catch (e) { throw new Error('parameters are not JSON: ' + e.message); }
        const r = await rpc('actions/invoke', { name: a.name, params: p, approved: approved || undefined });
        if (r.job) { upsertJob(r.job); notice('started ' + a.name + ' as job ' + r.job.id, 'ok'); }
      }));
    }
  }

  function upsertJob(j) {
    let e = st.jobs.get(j.id);
    if (!e) {
      const row = el('tr', { 'data-job': j.id },
        el('td', { class: 'mono' }, j.id), el('td', {}, j.action), el('td', { class: 'jstate' }),
        el('td', {}, el('span', { class: 'bar' }, el('span', {})), ' ', el('span', { class: 'pct' })),
        el('td', { class: 'msg' }), el('td', { class: 'ops' }));
      e = { job: j, row };
      // Newest first (a job not started yet counts as newest), whatever
      // order the list and the notifications arrive in.
      const key = (x) => x.started || Infinity;
      const body = $('jobs').querySelector('tbody');
      let before = null;
      for (const r of body.children) {
        const o = st.jobs.get(r.dataset.job);
        if (o && key(o.job) < key(j)) { before = r; break; }
      }
      body.insertBefore(row, before);
      st.jobs.set(j.id, e);
      while (st.jobs.size > MAX_JOBS) {
        const oldest = [...st.jobs.keys()].find((id) => isTerminal(st.jobs.get(id).job.state));
        if (!oldest) break;
        st.jobs.get(oldest).row.remove();
        st.jobs.delete(oldest);
      }
    }
    // Progress notifications may arrive out of order with the end: an end state sticks.
    if (isTerminal(e.job.state) && !isTerminal(j.state)) return;
    e.job = j;
    const pct = Math.max(0, Math.min(1, j.progress || 0)) * 100;
    e.row.className = 'job-' + j.state;
    e.row.dataset.state = j.state;
    e.row.dataset.progress = String(pct);
    e.row.querySelector('.jstate').textContent = j.state + (j.paused ? ' (paused)' : '') + (j.cancel_requested && !isTerminal(j.state) ? ' (cancelling)' : '');
    e.row.querySelector('.bar > span').style.width = pct.toFixed(0) + '%';
    e.row.querySelector('.pct').textContent = pct.toFixed(0) + '%';
    const x = j.extra || {};
    let msg = x.message || '';
    if (x.eta_s !== undefined && !isTerminal(j.state)) msg += (msg ? ' · ' : '') + 'ETA ' + Math.round(x.eta_s) + ' s';
    if (j.error) msg = describeError(new RPCError(j.error));
    if (j.state === 'waiting_operator' && x.instruction) msg = 'Operator: ' + x.instruction;
    const cell = e.row.querySelector('.msg');
    cell.textContent = msg;
    if (j.state === 'waiting_operator') cell.append(el('div', { class: 'ack' }, ...answerControls(j)));
    const ops = e.row.querySelector('.ops');
    ops.replaceChildren();
    if (!isTerminal(j.state)) {
      ops.append(el('button', { class: 'btn cancel needs-write', onclick: async () => {
        try { upsertJob(await rpc('jobs/cancel', { id: j.id })); } catch (err) { notice('cancel ' + j.id + ': ' + describeError(err), 'error'); }
      } }, 'Cancel'));
    }
  }

  // ---- operator answers (driver: manual) ----
  // The person at the instrument reports a waiting job done or failed, with
  // a note; operator/answer is an operator method (Mhp-Operator header).
  // The token is kept in this tab (common.js sends it with every request,
  // so the tab's session is opened again under it).
  const OP_KEY = 'mhp-operator-token';
  function askOperator() {
    const dlg = $('operator-dialog');
    return new Promise((resolve) => {
      dlg.addEventListener('close', () => {
        const v = $('operator-input').value.trim();
        if (v) sessionStorage.setItem(OP_KEY, v);
        $('operator-input').value = '';
        resolve(!!v);
      }, { once: true });
      dlg.showModal();
    });
  }
  async function operatorCall(method, params) {
    for (let attempt = 0; ; attempt++) {
      try {
        return await rpc(method, params);
      } catch (err) {
        if (attempt < 2 && err.data && err.data.reason === 'operator_required' && await askOperator()) {
          await reinit();
          continue;
        }
        throw err;
      }
    }
  }
  function answerControls(j) {
    const note = el('input', { class: 'ack-note', placeholder: 'note (optional)', size: '14' });
    const send = (outcome) => async () => {
      try {
        const r = await operatorCall('operator/answer', { job: j.id, outcome, note: note.value || undefined });
        if (r && r.job) upsertJob(r.job);
        notice(j.id + ': ' + outcome + ' reported' + (r && r.by && r.by.name ? ' by ' + r.by.name : ''), 'ok');
      } catch (err) { notice('answer ' + j.id + ': ' + describeError(err), 'error'); }
    };
    return [note, el('button', { class: 'btn ack-done', onclick: send('done') }, 'Done'),
      el('button', { class: 'btn ack-failed', onclick: send('failed') }, 'Failed')];
  }

  const isTerminal = (s) => s === 'done' || s === 'failed' || s === 'cancelled';

  async function loadJobs() {
    const list = await rpc('jobs/list', {});
    const jobs = (Array.isArray(list) ? list : (list && list.jobs) || []).slice();
    jobs.sort((a, b) => (b.started || Infinity) - (a.started || Infinity));
    for (const j of jobs.slice(0, MAX_JOBS)) upsertJob(j);
  }

  // ---- lease ----
  // holderName shows a holder's label; a bare session id (a bearer of that
  // session on servers that report ids) is never put on the screen.
  function holderName(h) {
    if (typeof h !== 'string' || !h) return 'another client';
    if (h === MHP.session() || (MHP.label() && h === MHP.label())) return 'this page';
    return /^s_[0-9a-f]{16,}$/i.test(h) ? 'another client' : h;
  }

  function renderLease(text) {
    $('lease').textContent = 'Lease: ' + text;
    $('acquire').hidden = st.leased;
    $('release').hidden = !st.leased;
  }

  async function acquire() {
    try {
      const l = await rpc('session/acquire', { ttl: 60 });
      st.leased = true;
      renderLease('held by this page');
      clearInterval(st.leaseTimer);
      st.leaseTimer = setInterval(async () => {
        try { await rpc('session/renew', {}); } catch (e) { st.leased = false; clearInterval(st.leaseTimer); renderLease('lost: ' + describeError(e)); }
      }, 20000);
    } catch (e) {
      notice('take control: ' + describeError(e), 'error');
      probeLease();
    }
  }

  async function release() {
    clearInterval(st.leaseTimer);
    try { await rpc('session/release', {}); } catch (e) { notice('release: ' + describeError(e), 'error'); }
    st.leased = false;
    renderLease('free');
    probeLease();
  }

  // probeLease learns the holder's label with a dry run of an action that
  // takes no parameters: a dry run only reports, it never acts.
  async function probeLease() {
    if (st.leased || !st.desc) return;
    const a = (st.desc.actions || []).find((x) => Object.keys(x.params || {}).length === 0);
    if (!a) { renderLease(st.leased ? 'held by this page' : 'not held by this page'); return; }
    try {
      const r = await rpc('actions/invoke', { name: a.name, params: {}, dryRun: true });
      const n = r.notes || {};
      renderLease(n.leaseHeldBy ? 'held by ' + holderName(n.leaseHeldBy) : n.needsLease ? 'free (writes need it)' : 'free');
    } catch (e) {
      // A dry run refused for another reason (an interlock, estop) says nothing of the lease.
      renderLease(e.data && e.data.holder ? 'held by ' + holderName(e.data.holder) : 'not held by this page');
    }
  }

  // ---- receipts (evidence) ----
  async function refreshReceipts() {
    if (!st.evidence) return;
    try {
      // evidence/list pages in chain order from "after": learn the head, then read the last ten.
      const first = await rpc('evidence/list', { limit: 1 });
      const head = (first && first.head) || 0;
      const page = head > 10 ? await rpc('evidence/list', { after: head - 10, limit: 10 }) : await rpc('evidence/list', { limit: 10 });
      const entries = (page && page.entries) || [];
      const body = $('receipts').querySelector('tbody');
      body.replaceChildren();
      for (const e of entries.slice().reverse()) {
        const what = [e.method, e.name, e.job].filter(Boolean).join(' ');
        const outcome = (e.outcome || '') + (e.error ? ': ' + (e.error.message || e.error.code) : '') + (e.session ? ' · ' + e.session : '');
        body.append(el('tr', { 'data-seq': e.seq }, el('td', {}, e.seq), el('td', {}, e.ts ? new Date(e.ts * 1000).toLocaleTimeString() : ''),
          el('td', {}, what), el('td', {}, outcome)));
      }
      $('receipts-panel').hidden = false;
    } catch (e) {
      if (e instanceof RPCError && (e.code === -32601 || e.code === -32050)) {
        st.evidence = false; // the server keeps no evidence: no panel
        $('receipts-panel').hidden = true;
        $('receipts-panel').dataset.evidence = 'none';
      }
    }
  }

  // ---- notifications ----
  function onNotification(f) {
    const p = f.params || {};
    switch (f.method) {
      case 'notifications/signals/update': signalValue(p.name, p.value); break;
      case 'notifications/settings/changed': {
        const s = st.settings.get(p.name);
        if (s && p.value !== undefined) s.row.querySelector('.cur').textContent = fmt(p.value, s.spec.unit);
        break;
      }
      case 'notifications/safety/fault': st.faultReason = p.reason; renderBanner(p.reason); break;
      case 'notifications/safety/reset': st.faultReason = ''; break;
      case 'notifications/backend/link': st.backend = p.backend || null; break;
      case 'notifications/operator/instruction': notice('Operator instruction: ' + (p.text || p.message || JSON.stringify(p))); break;
      default:
        if (f.method && f.method.startsWith('notifications/jobs/') && p.job) {
          upsertJob(p.job);
          if (f.method === 'notifications/jobs/finished') refreshReceipts();
        }
    }
    if (p.state) setState(p.state);
  }

  async function stream(gen) {
    let last = '';
    while (gen === st.streamGen) {
      st.streamAbort = new AbortController();
      try {
        const r = await MHP.events(last, onNotification, (c) => {
          if (c.startsWith('lost')) loadJobs().catch(() => {});
        }, st.streamAbort.signal);
        last = r.lastID;
        if (r.status === 404) { await reinit(); return; }
      } catch (e) { /* dropped: reconnect */ }
      if (gen !== st.streamGen) return;
      await sleep(1000);
    }
  }

  // ---- connection ----
  // A lost session (server restart, expiry) is reopened with initialize
  // alone before the waiting call is retried, so that an estop pressed at
  // that moment is not held up by the page reloading its tables.
  let reiniting = null;
  function reinit() {
    if (!reiniting) {
      reiniting = openSession().then(() => { setup().catch(() => {}); }).finally(() => { reiniting = null; });
    }
    return reiniting;
  }
  MHP.reinit = reinit;

  async function openSession() {
    st.streamGen++;
    if (st.streamAbort) st.streamAbort.abort();
    st.leased = false;
    await rpc('initialize', { protocolVersion: MHP.PROTOCOL, clientInfo: { name: 'mhp-console', version: '1' } });
  }

  async function setup() {
    const d = await rpc('device/describe', { detail: 'full' });
    const first = !st.desc;
    st.desc = d;
    st.backend = d.backend || null;
    if (first) {
      renderCard(d);
      renderSignals(d.signals);
      renderSettings(d.settings);
      renderActions(d.actions);
    }
    setState(d.state);
    if (st.signals.size) await rpc('signals/subscribe', { names: [] });
    stream(st.streamGen);
    renderLease('not held by this page');
    await Promise.allSettled([readSignals(), loadJobs(), refreshReceipts(), probeLease()]);
  }

  async function connect() {
    await MHP.whoami();
    await openSession();
    await setup();
  }

  async function ping() {
    try {
      const r = await rpc('ping', {}, { timeout: 5000 });
      st.reachable = true;
      st.backend = r.backend || st.backend;
      if (r.backend === undefined && st.backend && st.backend.connected === false) st.backend = null;
      setState(r.state);
    } catch (e) {
      if (e.code === 'unreachable') {
        st.reachable = false;
        const box = $('state');
        box.className = 'state unreachable';
        box.textContent = 'no answer';
      }
      renderBanner();
    }
  }

  // ---- estop and reset ----
  $('estop').addEventListener('click', () => estop());

  async function estop() {
    const btn = $('estop');
    btn.disabled = true;
    try {
      const r = await rpc('safety/estop', { reason: 'operator console' }, { timeout: 5000 });
      setState(r.state);
      const cancelling = r.cancelling || r.cancelled || [];
      const how = r.stopped ? ', stop confirmed' : r.stop_pending ? ', stop still pending (the device reports when it ends)' : ', stop hook failed: ' + (r.stop_error || 'unknown');
      notice('E-STOP: device ' + r.state + how + (cancelling.length ? '; cancelling ' + cancelling.join(', ') : ''), r.stopped || r.stop_pending ? 'ok' : 'error');
    } catch (e) {
      notice('E-STOP NOT CONFIRMED: ' + describeError(e) + ' — use the hardware stop.', 'error');
    } finally {
      btn.disabled = false;
    }
    refreshReceipts();
  }

  $('reset').addEventListener('click', async () => {
    try {
      const r = await rpc('safety/reset', {});
      setState(r.state);
      notice('reset: device ' + r.state + (r.verified ? ' (verified)' : ''), 'ok');
    } catch (e) {
      notice('reset refused: ' + describeError(e), 'error');
    }
    refreshReceipts();
  });
  $('acquire').addEventListener('click', acquire);
  $('release').addEventListener('click', release);

  async function main() {
    for (;;) {
      try { await connect(); break; } catch (e) {
        st.reachable = false;
        $('dev-id').textContent = 'not connected';
        notice('connecting: ' + describeError(e), 'error');
        renderBanner();
        await sleep(2000);
      }
    }
    st.reachable = true;
    renderBanner();
    setInterval(ping, 2000);
    setInterval(() => { readSignals().catch(() => {}); }, 3000);
    setInterval(ageSignals, 1000);
    setInterval(probeLease, 5000);
    document.body.dataset.ready = 'true';
  }
  main();
})();

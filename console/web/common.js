'use strict';
// Shared by the device and lab pages: JSON-RPC over fetch, the bearer token
// (asked once, kept in sessionStorage, never put in a URL), an SSE reader
// over fetch (so the token and session travel in headers), and DOM helpers.
// Paths are relative to the page (rpc, events, whoami), so a page mounted
// under a prefix (mhp-mcp --console: /devices/ID/) talks to its own device.
const MHP = (() => {
  const TOKEN_KEY = 'mhp-token';
  const OPERATOR_KEY = 'mhp-operator-token';
  const PROTOCOL = '2026-09-12';
  let session = '';
  let label = ''; // this page's public session label (holders and owners name it)
  let nextID = 1;
  let asking = null;

  class RPCError extends Error {
    constructor(e) {
      super(e.message || String(e.code));
      this.code = e.code;
      this.data = e.data || {};
    }
  }

  const token = () => sessionStorage.getItem(TOKEN_KEY) || '';

  function headers(extra) {
    const h = Object.assign({ 'Content-Type': 'application/json' }, extra || {});
    const t = token();
    if (t) h.Authorization = 'Bearer ' + t;
    // The operator token, once the person gave it in this tab (operator
    // answers), goes with every request: the tab's identity stays one.
    const op = sessionStorage.getItem(OPERATOR_KEY);
    if (op) h['Mhp-Operator'] = op;
    if (session) h['Mhp-Session'] = session;
    return h;
  }

  // whoami asks the server who this page is signed in as (a client
  // certificate, the token, or nobody) and shows it; without the write role
  // the page hides its write controls (class needs-write), without the
  // operator role its operator controls (needs-operator). The server refuses
  // them anyway: hiding only spares the person the refusal.
  async function whoami() {
    let w = { name: '', role: '', via: '', can: [] };
    try {
      const resp = await fetch('whoami', { headers: headers(), credentials: 'same-origin', cache: 'no-store' });
      if (resp.ok) w = await resp.json();
    } catch (e) { /* unreachable: keep nobody */ }
    const can = new Set(w.can || []);
    document.body.classList.toggle('read-only', !can.has('write'));
    document.body.classList.toggle('not-operator', !can.has('operator'));
    document.body.dataset.role = w.role || 'none';
    const who = document.getElementById('who');
    if (who) {
      const how = { cert: 'client certificate', token: 'token', none: 'no credentials needed' }[w.via] || '';
      who.textContent = w.role ? (w.name ? w.name + ' · ' : '') + w.role + (how ? ' (' + how + ')' : '') : 'not signed in';
    }
    return w;
  }

  // askToken shows the token dialog once at a time and resolves when the
  // person has entered one. It is only reached on a 401: a browser whose
  // client certificate names an identity is never asked.
  function askToken() {
    if (asking) return asking;
    const dlg = document.getElementById('token-dialog');
    asking = new Promise((resolve) => {
      dlg.addEventListener('close', () => {
        const v = document.getElementById('token-input').value.trim();
        if (v) sessionStorage.setItem(TOKEN_KEY, v);
        document.getElementById('token-input').value = '';
        asking = null;
        whoami().finally(resolve);
      }, { once: true });
      dlg.showModal();
    });
    return asking;
  }

  async function post(path, body, timeoutMs) {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), timeoutMs || 15000);
    try {
      return await fetch(path, {
        method: 'POST', headers: headers(), body: JSON.stringify(body),
        signal: ctl.signal, credentials: 'same-origin', cache: 'no-store', // same-origin: a client certificate (mutual TLS) is shown
      });
    } finally {
      clearTimeout(timer);
    }
  }

  // rpc calls method; it asks for the token on 401 and, when the session is
  // gone (server restart, expiry), calls MHP.reinit and retries once.
  async function rpc(method, params, opts) {
    opts = opts || {};
    for (let attempt = 0; attempt < 4; attempt++) {
      let resp;
      try {
        resp = await post(opts.path || 'rpc', { jsonrpc: '2.0', id: nextID++, method, params: params || {} }, opts.timeout);
      } catch (e) {
        throw new RPCError({ code: 'unreachable', message: 'the server did not answer (' + (e.name === 'AbortError' ? 'timeout' : e.message) + ')' });
      }
      if (resp.status === 401) {
        await askToken();
        continue;
      }
      let frame;
      try {
        frame = await resp.json();
      } catch (e) {
        throw new RPCError({ code: 'http_' + resp.status, message: 'not a JSON-RPC answer (HTTP ' + resp.status + ')' });
      }
      if (frame.error) {
        const d = frame.error.data || {};
        if (method !== 'initialize' && (d.reason === 'session_unknown' || d.reason === 'not_initialized') && api.reinit && attempt < 2) {
          await api.reinit();
          continue;
        }
        throw new RPCError(frame.error);
      }
      if (method === 'initialize') {
        session = resp.headers.get('Mhp-Session') || (frame.result && frame.result.session) || '';
        label = (frame.result && frame.result.label) || '';
      }
      return frame.result;
    }
    throw new RPCError({ code: 'unauthorized', message: 'the server refused the token' });
  }

  // postJSON posts a plain JSON body (not JSON-RPC) with the token.
  async function postJSON(path, body, timeoutMs) {
    for (let attempt = 0; attempt < 3; attempt++) {
      const resp = await post(path, body, timeoutMs);
      if (resp.status === 401) {
        await askToken();
        continue;
      }
      if (!resp.ok) throw new Error(path + ': HTTP ' + resp.status + ' ' + (await resp.text()));
      return resp.json();
    }
    throw new Error('the server refused the token');
  }

  // events reads GET /events as Server-Sent Events until signal aborts,
  // calling onFrame for each data frame and onComment for ": ..." lines.
  // It resolves when the stream ends (the caller reconnects).
  async function events(lastID, onFrame, onComment, signal) {
    const h = headers({ Accept: 'text/event-stream' });
    delete h['Content-Type'];
    if (lastID) h['Last-Event-ID'] = lastID;
    const resp = await fetch('events', { headers: h, signal, credentials: 'same-origin', cache: 'no-store' });
    if (resp.status === 401) {
      await askToken();
      return { status: 401, lastID };
    }
    if (!resp.ok) return { status: resp.status, lastID };
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        let data = '';
        for (const line of block.split('\n')) {
          if (line.startsWith('id:')) lastID = line.slice(3).trim();
          else if (line.startsWith('data:')) data += line.slice(5).trim();
          else if (line.startsWith(':') && onComment) onComment(line.slice(1).trim());
        }
        if (data) {
          try { onFrame(JSON.parse(data)); } catch (e) { console.error('event', e, data); }
        }
      }
      if (buf.length > 8 << 20) buf = ''; // a runaway frame: drop it rather than grow
    }
    return { status: 200, lastID };
  }

  // el builds an element: el('td', {class: 'x'}, 'text', child...).
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const k of kids) {
      if (k === undefined || k === null) continue;
      e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return e;
  }

  let noticeTimer = 0;
  function notice(text, kind) {
    const n = document.getElementById('notice');
    n.textContent = text;
    n.className = 'notice ' + (kind || '');
    n.hidden = false;
    clearTimeout(noticeTimer);
    if (kind !== 'error') noticeTimer = setTimeout(() => { n.hidden = true; }, 8000);
  }

  // describeError renders an MHP error with what was refused and why.
  function describeError(e) {
    if (!(e instanceof RPCError)) return String(e);
    const d = e.data || {};
    const bits = [];
    for (const k of ['gate', 'reason', 'field', 'interlock', 'holder', 'approval', 'outcome']) {
      if (d[k] === undefined) continue;
      // A bare session id is a bearer of that session: never shown.
      const v = k === 'holder' && /^s_[0-9a-f]{16,}$/i.test(String(d[k])) ? 'another client' : d[k];
      bits.push(k + ': ' + v);
    }
    let hint = '';
    if (d.reason === 'origin_forbidden' || d.reason === 'host_forbidden') {
      hint = ' — this page was opened as ' + location.host + ': open it by IP address or localhost, or start the server with --allow-host ' + location.hostname;
    }
    return e.message + (bits.length ? ' (' + bits.join(', ') + ')' : '') + (typeof e.code === 'number' ? ' [' + e.code + ']' : '') + hint;
  }

  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

  function fmt(v, unit) {
    if (v === null || v === undefined) return '—';
    if (typeof v === 'number') return (Number.isInteger(v) ? String(v) : v.toFixed(2)) + (unit ? ' ' + unit : '');
    if (typeof v === 'object') return JSON.stringify(v);
    return String(v) + (unit ? ' ' + unit : '');
  }

  const api = {
    PROTOCOL, RPCError, rpc, postJSON, events, el, notice, describeError, sleep, fmt, askToken, whoami,
    session: () => session,
    label: () => label,
    reinit: null,
  };
  return api;
})();

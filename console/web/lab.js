'use strict';
// The lab page: every device of the directory with its live state, BM25
// search, links to each device's page, and estop-all with each answer.
(() => {
  const { rpc, el, notice, describeError, sleep } = MHP;
  const $ = (id) => document.getElementById(id);
  let query = '';
  let gen = 0;

  function pageOf(target) {
    if (!/^https?:\/\//.test(target || '')) return null;
    return target.replace(/\/+$/, '') + '/';
  }

  function render(results) {
    const body = $('devices').querySelector('tbody');
    body.replaceChildren();
    for (const r of results) {
      const page = pageOf(r.target);
      const state = r.state || 'unknown';
      body.append(el('tr', { 'data-device': r.id, 'data-state': state },
        el('td', {}, page ? el('a', { href: page, target: '_blank', rel: 'noopener' }, r.id) : r.id,
          el('div', { class: 'muted' }, r.target || '')),
        el('td', {}, r.class || ''),
        el('td', {}, [r.make, r.model].filter(Boolean).join(' ')),
        el('td', {}, r.location || ''),
        el('td', {}, el('span', { class: 'state ' + state, title: r.error || '' }, state)),
        el('td', {}, query ? (r.score || 0).toFixed(2) : '')));
    }
    $('lab-count').textContent = results.length + (query ? ' found for “' + query + '”' : ' devices');
  }

  async function refresh() {
    const mine = ++gen;
    try {
      const r = await rpc('directory/search', { query, limit: 200, live: true }, { timeout: 10000 });
      if (mine !== gen) return; // a newer search answered first
      render(r.results || []);
      $('banner').hidden = true;
    } catch (e) {
      const b = $('banner');
      b.hidden = false;
      b.textContent = 'The directory does not answer: ' + describeError(e);
    }
  }

  let typing = 0;
  $('search').addEventListener('input', () => {
    clearTimeout(typing);
    typing = setTimeout(() => { query = $('search').value.trim(); refresh(); }, 200);
  });

  MHP.whoami();
  $('estop-all').addEventListener('click', async () => {
    const btn = $('estop-all');
    btn.disabled = true;
    try {
      const r = await MHP.postJSON('lab/estop-all', { reason: 'lab console estop-all' }, 15000);
      const body = $('estop-answers').querySelector('tbody');
      body.replaceChildren();
      let bad = 0;
      for (const a of r.answers) {
        if (!a.stopped && !a.pending) bad++;
        body.append(el('tr', { 'data-answer': a.id || a.target, 'data-stopped': String(a.stopped) },
          el('td', {}, a.id || a.target), el('td', {}, a.state || '—'), el('td', {}, a.stopped ? 'yes' : a.pending ? 'pending' : 'NO'),
          el('td', {}, (a.seconds * 1000).toFixed(0) + ' ms'), el('td', {}, a.error || '')));
      }
      $('answers-panel').hidden = false;
      notice('E-STOP ALL: ' + (r.answers.length - bad) + ' of ' + r.answers.length + ' devices confirmed' + (bad ? ' — check the others by hand' : ''), bad ? 'error' : 'ok');
    } catch (e) {
      notice('E-STOP ALL NOT CONFIRMED: ' + describeError(e) + ' — use the hardware stops.', 'error');
    } finally {
      btn.disabled = false;
    }
    refresh();
  });

  async function main() {
    await refresh();
    document.body.dataset.ready = 'true';
    for (;;) {
      await sleep(3000);
      await refresh();
    }
  }
  main();
})();

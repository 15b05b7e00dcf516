// Tenants: quota per model (guaranteed, used, borrowed, limits), fair-share rank, and history.
import { getJSON, withQuery } from '../api.js';
import { lineChart, setLines, destroyChart } from '../chart.js';
import { esc, gpuCount, num, tenantColour } from '../format.js';

const RANGES = { '6h': { s: 6 * 3600, step: '5m' }, '24h': { s: 24 * 3600, step: '15m' }, '7d': { s: 7 * 86400, step: '1h' } };
const CHART_EVERY_MS = 30000;
const SERIES = [
  { name: 'guaranteed_milli_gpus', label: 'guaranteed', colour: '#6b7280', dash: [5, 4] },
  { name: 'used_milli_gpus', label: 'used', colour: '#0072b2' },
  { name: 'borrowed_milli_gpus', label: 'borrowed', colour: '#d55e00' },
  { name: 'lent_milli_gpus', label: 'lent', colour: '#009e73' },
];

function totals(t) {
  let guaranteed = 0;
  let used = 0;
  for (const q of Object.values(t.quota || {})) {
    guaranteed += Number(q.guaranteed_gpus) || 0;
    used += Number(q.used_gpus) || 0;
  }
  return { guaranteed, used, ratio: guaranteed > 0 ? used / guaranteed : null };
}

// Ranks tenants by used/guaranteed, the most below its share first; tenants without a guarantee last.
function ranks(list) {
  const order = list
    .map((t) => ({ name: t.name, ...totals(t) }))
    .sort((a, b) => {
      if (a.ratio === null && b.ratio === null) return a.name.localeCompare(b.name);
      if (a.ratio === null) return 1;
      if (b.ratio === null) return -1;
      return a.ratio - b.ratio || a.name.localeCompare(b.name);
    });
  const out = new Map();
  order.forEach((x, i) => out.set(x.name, { rank: x.ratio === null ? null : i + 1, ...x }));
  return out;
}

function bar(q, colour) {
  const g = Number(q.guaranteed_gpus) || 0;
  const u = Number(q.used_gpus) || 0;
  const scale = Math.max(g, u);
  if (!scale) return '<div class="bar"></div>';
  const within = (100 * Math.min(u, g)) / scale;
  const over = (100 * Math.max(0, u - g)) / scale;
  return `<div class="bar" title="${esc(`${gpuCount(u)} used of ${gpuCount(g)} guaranteed`)}">` +
    `<span class="bar-in c${colour}" data-w="${within.toFixed(2)}"></span>` +
    `<span class="bar-over c${colour} b" data-w="${over.toFixed(2)}"></span>` +
    `<span class="bar-mark" data-left="${((100 * g) / scale).toFixed(2)}"></span></div>`;
}

function bodyHtml(t, index, rank, count) {
  const c = tenantColour(t.name, index);
  const models = Object.keys(t.quota || {}).sort();
  const rows = models.map((m) => {
    const q = t.quota[m];
    const g = Number(q.guaranteed_gpus) || 0;
    const u = Number(q.used_gpus) || 0;
    const ratio = g > 0 ? `${num((100 * u) / g)}%` : (u > 0 ? 'no guarantee' : '–');
    const limit = q.borrowing_limit_gpus === null || q.borrowing_limit_gpus === undefined ? 'none' : gpuCount(q.borrowing_limit_gpus);
    return `<tr data-model="${esc(m)}"><td>${esc(m)}</td><td class="num" data-figure="guaranteed">${gpuCount(g)}</td><td class="num" data-figure="used">${gpuCount(u)}</td>` +
      `<td class="num">${gpuCount(q.borrowed_gpus)}</td><td class="num">${esc(limit)}</td><td class="num">${gpuCount(q.lending_limit_gpus)}</td>` +
      `<td class="num">${gpuCount(q.held_by_windows_gpus)}</td><td class="num">${esc(ratio)}</td><td class="bar-cell">${bar(q, c)}</td></tr>`;
  });
  const share = rank && rank.rank
    ? `rank ${num(rank.rank)} of ${num(count)} · using ${num(100 * rank.ratio)}% of its guarantee`
    : 'no guarantee';
  const queues = (t.queues || []).map((q) => `<span class="tag">${esc(q)}</span>`).join(' ');
  return `<h2><span class="swatch gpu c${c}"></span>${esc(t.name)} <small>${t.org ? `org ${esc(t.org)} · ` : ''}weight ${esc(t.weight)}</small></h2>` +
    `<dl class="facts"><dt>jobs</dt><dd>${num(t.jobs_running)} running · ${num(t.jobs_pending)} pending</dd>` +
    `<dt>fair share</dt><dd class="fair-share">${esc(share)}</dd><dt>queues</dt><dd>${queues || '–'}</dd></dl>` +
    `<div class="table-wrap"><table class="grid compact quota"><thead><tr><th>model</th><th class="num">guaranteed</th><th class="num">used</th>` +
    `<th class="num">borrowed</th><th class="num">borrow limit</th><th class="num">lend limit</th><th class="num">held by windows</th>` +
    `<th class="num">used / guar.</th><th class="bar-cell">used against guarantee</th></tr></thead>` +
    `<tbody>${rows.join('') || '<tr><td colspan="9" class="empty">No quota.</td></tr>'}</tbody></table></div>`;
}

function applyBars(el) {
  for (const s of el.querySelectorAll('[data-w]')) s.style.width = `${s.dataset.w}%`;
  for (const s of el.querySelectorAll('[data-left]')) s.style.left = `${s.dataset.left}%`;
}

function create(root, ctx) {
  let shape = null;
  let range = '6h';
  let model = '';
  let models = [];
  const bodies = new Map(); // tenant -> { el, html }
  const charts = new Map(); // tenant -> Chart
  let chartsAt = 0;

  root.addEventListener('click', (e) => {
    const b = e.target.closest('button[data-range]');
    if (!b || !root.contains(b) || !RANGES[b.dataset.range]) return;
    range = b.dataset.range;
    for (const x of root.querySelectorAll('button[data-range]')) x.classList.toggle('active', x.dataset.range === range);
    chartsAt = 0;
    ctx.refreshNow();
  });
  root.addEventListener('change', (e) => {
    if (e.target.id !== 'tenants-model') return;
    model = e.target.value;
    chartsAt = 0;
    ctx.refreshNow();
  });

  function skeleton(list) {
    for (const c of charts.values()) destroyChart(c);
    charts.clear();
    bodies.clear();
    const rangeButtons = Object.keys(RANGES).map((r) =>
      `<button type="button" data-range="${r}" class="${r === range ? 'active' : ''}">${r}</button>`).join('');
    const modelOptions = ['<option value="">all models</option>',
      ...models.map((m) => `<option value="${esc(m)}"${m === model ? ' selected' : ''}>${esc(m)}</option>`)].join('');
    const cards = list.map((t) =>
      `<section class="card tenant" data-tenant="${esc(t.name)}"><div class="tenant-body"></div>` +
      `<div class="chart-box"><canvas data-chart="tenant-${esc(t.name)}"></canvas></div></section>`);
    root.innerHTML =
      `<div class="view-head"><h1>Tenants</h1><div class="range" role="group" aria-label="history range">${rangeButtons}</div>` +
      `<label class="inline">model <select id="tenants-model">${modelOptions}</select></label></div>` +
      `<div class="tenant-list">${cards.join('') || '<p class="empty">No tenants.</p>'}</div>`;
    for (const sec of root.querySelectorAll('section.tenant')) {
      const name = sec.dataset.tenant;
      bodies.set(name, { el: sec.querySelector('.tenant-body'), html: '' });
      const chart = lineChart(sec.querySelector('canvas'), {
        yTitle: 'GPUs',
        yFormat: (v) => gpuCount(Math.round(v * 1000) / 1000),
        withDay: () => range !== '6h',
      });
      if (chart) charts.set(name, chart);
    }
    chartsAt = 0;
  }

  async function refreshCharts(signal) {
    const now = Math.floor(Date.now() / 1000);
    const r = RANGES[range];
    const data = await getJSON(withQuery('/v1/history', {
      series: SERIES.map((s) => s.name).join(','), from: now - r.s, to: now, step: r.step,
    }), signal);
    // tenant -> series -> (time -> GPUs), summed over the models chosen.
    const sums = new Map();
    for (const s of data.series || []) {
      const labels = s.labels || {};
      if (model && labels.model !== model) continue;
      const tenant = labels.tenant;
      if (!sums.has(tenant)) sums.set(tenant, new Map());
      const per = sums.get(tenant);
      if (!per.has(s.name)) per.set(s.name, new Map());
      const acc = per.get(s.name);
      for (const [t, v] of s.points || []) acc.set(t, (acc.get(t) || 0) + v / 1000);
    }
    for (const [tenant, chart] of charts) {
      const per = sums.get(tenant) || new Map();
      setLines(chart, SERIES.map((s) => ({
        label: s.label,
        colour: s.colour,
        dash: s.dash,
        points: [...(per.get(s.name) || new Map()).entries()].sort((a, b) => a[0] - b[0]),
      })), { from: now - r.s, to: now });
    }
    chartsAt = Date.now();
  }

  return {
    async refresh(signal) {
      const data = await getJSON('/v1/tenants', signal);
      const t0 = performance.now();
      const list = data.tenants || [];
      const modelSet = new Set();
      for (const t of list) for (const m of Object.keys(t.quota || {})) modelSet.add(m);
      models = [...modelSet].sort();
      const key = `${list.map((t) => t.name).join('\u0000')}|${models.join(',')}`;
      if (key !== shape) {
        shape = key;
        skeleton(list);
      }
      const rank = ranks(list);
      list.forEach((t, i) => {
        const b = bodies.get(t.name);
        if (!b) return;
        const html = bodyHtml(t, i, rank.get(t.name), list.length);
        if (html !== b.html) {
          b.el.innerHTML = html;
          b.html = html;
          applyBars(b.el);
        }
      });
      ctx.rendered(t0);
      if (charts.size && Date.now() - chartsAt >= CHART_EVERY_MS) {
        try {
          await refreshCharts(signal);
        } catch (e) {
          if (e.name === 'AbortError' || e.status === 401) throw e;
          chartsAt = Date.now();
          throw new Error(`history: ${e.message}`);
        }
      }
    },
    unmount() {
      for (const c of charts.values()) destroyChart(c);
      charts.clear();
    },
  };
}

export default { name: 'tenants', title: 'Tenants', create };

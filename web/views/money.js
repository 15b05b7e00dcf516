// Money (with a market): prices and their day, a tenant's bill with CSV, budgets, idle GPU cost.
import { getJSON, withQuery } from '../api.js';
import { barChart, destroyChart, lineChart, setBars, setLines } from '../chart.js';
import { csvField, esc, money, num, PALETTE, startOfTodayUtc, utcDay } from '../format.js';

const SLOW_EVERY_MS = 30000;
const CLASS_DASH = { standard: [], preemptible: [6, 3], emergency: [2, 2] };
const MAX_BARS = 40;

function rangeDays(kind, now = new Date()) {
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth();
  const first = kind === 'quarter' ? new Date(Date.UTC(y, m - (m % 3), 1)) : new Date(Date.UTC(y, m, 1));
  return { from: utcDay(first), to: utcDay(now) };
}

function gpuHours(series, stepS) {
  let sum = 0;
  for (const [, v] of series.points || []) sum += ((Number(v) || 0) / 1000) * (stepS / 3600);
  return sum;
}

export function billCsv(groups) {
  const lines = ['group,charges,credits,net,gpu_hours,entries'];
  for (const g of groups) {
    lines.push([g.group, g.charges, g.credits, g.net, g.gpu_hours, g.entries].map(csvField).join(','));
  }
  return `${lines.join('\r\n')}\r\n`;
}

function create(root, ctx) {
  const market = !!ctx.who.market;
  let slowAt = 0;
  let billDirty = true;
  let prices = null;
  let tenantNames = [];
  let priceChart = null;
  let billChart = null;
  let csvUrl = null;
  let pricesHtml = '';
  let budgetsHtml = '';

  if (!market) {
    return {
      async refresh() {
        root.innerHTML = '<p class="empty no-market">This server has no internal market.</p>';
        ctx.rendered(performance.now());
      },
      unmount() {},
    };
  }

  const month = rangeDays('month');
  root.innerHTML =
    '<div class="view-head"><h1>Money</h1><span class="muted currency"></span></div>' +
    '<div class="columns"><section class="card prices"><h2>Prices <small>per GPU-hour</small></h2><div class="prices-table"></div></section>' +
    '<section class="card"><h2>Prices today <small>UTC</small></h2><div class="chart-box"><canvas data-chart="prices"></canvas></div><p class="note price-note"></p></section></div>' +
    '<section class="card bill"><h2>Bill</h2><form id="bill-form" class="controls">' +
    '<label>tenant <select id="bill-tenant"></select></label>' +
    '<label>range <select id="bill-range"><option value="month">this month</option><option value="quarter">this quarter</option><option value="custom">custom dates</option></select></label>' +
    `<label class="custom" hidden>from <input type="date" id="bill-from" value="${month.from}"></label>` +
    `<label class="custom" hidden>to <input type="date" id="bill-to" value="${month.to}"></label>` +
    '<label>by <select id="bill-by"><option value="team">team</option><option value="job">job</option><option value="model">model</option><option value="label">label</option></select></label>' +
    '<a id="download-csv" class="button" aria-disabled="true">Download CSV</a></form>' +
    '<p class="note bill-note"></p><div class="columns bill-out"><div class="chart-box tall"><canvas data-chart="bill"></canvas></div><div class="bill-table table-wrap"></div></div></section>' +
    '<div class="columns"><section class="card budgets"><h2>Budgets <small>this quarter</small></h2><div class="budget-list"></div></section>' +
    '<section class="card idle"><h2>Allocated but idle <small>today, UTC</small></h2><div class="idle-table"></div></section></div>';

  const $ = (sel) => root.querySelector(sel);
  priceChart = lineChart($('canvas[data-chart="prices"]'), { yTitle: 'per GPU-hour', yFormat: (v) => money(v) });
  billChart = barChart($('canvas[data-chart="bill"]'), { label: 'net', yFormat: (v) => money(v) });

  $('#bill-form').addEventListener('submit', (e) => e.preventDefault());
  root.addEventListener('change', (e) => {
    if (!e.target.closest('#bill-form')) return;
    if (e.target.id === 'bill-range') {
      for (const l of root.querySelectorAll('#bill-form .custom')) l.hidden = e.target.value !== 'custom';
    }
    billDirty = true;
    ctx.refreshNow();
  });
  root.addEventListener('click', (e) => {
    const a = e.target.closest('#download-csv');
    if (a && !a.getAttribute('href')) e.preventDefault();
  });

  function billQuery() {
    const kind = $('#bill-range').value;
    const r = kind === 'custom' ? { from: $('#bill-from').value, to: $('#bill-to').value } : rangeDays(kind);
    return { tenant: $('#bill-tenant').value, from: r.from, to: r.to, by: $('#bill-by').value };
  }

  function renderPrices(p) {
    $('.currency').textContent = p.currency ? `currency: ${p.currency}` : '';
    const rows = (p.models || []).map((m) => {
      const c = m.per_gpu_hour || {};
      return `<tr data-model="${esc(m.model)}"><td>${esc(m.model)}</td><td class="num">${esc(num(100 * (m.utilisation || 0)))}%</td>` +
        `<td class="num" data-class="standard">${esc(money(c.standard ?? m.standard_per_gpu_hour))}</td>` +
        `<td class="num" data-class="preemptible">${esc(money(c.preemptible))}</td>` +
        `<td class="num" data-class="emergency">${esc(money(c.emergency))}</td><td class="num">${esc(money(m.cost_base))}</td>` +
        `<td class="num" title="utilisation × time multipliers">×${esc(num(m.utilisation_multiplier, 2))} ×${esc(num(m.time_multiplier, 2))}</td></tr>`;
    });
    const html = `<table class="grid compact"><thead><tr><th>model</th><th class="num">utilisation</th><th class="num">standard</th>` +
      `<th class="num">preemptible</th><th class="num">emergency</th><th class="num">cost base</th><th class="num">multipliers</th></tr></thead>` +
      `<tbody>${rows.join('') || '<tr><td colspan="7" class="empty">No models.</td></tr>'}</tbody></table>`;
    if (html !== pricesHtml) {
      $('.prices-table').innerHTML = html;
      pricesHtml = html;
    }
  }

  function renderBudgets(list) {
    const rows = list.map((t) => {
      const b = t.budget;
      if (!b || !b.budget) {
        return `<div class="budget" data-tenant="${esc(t.name)}"><span class="budget-name">${esc(t.name)}</span><span class="muted">no budget</span></div>`;
      }
      const spent = Number(b.spent) || 0;
      const total = Number(b.budget) || 0;
      const ratio = total > 0 ? spent / total : 0;
      const cls = ratio >= 1 ? 'over' : ratio >= 0.8 ? 'warn' : '';
      return `<div class="budget ${cls}" data-tenant="${esc(t.name)}"><span class="budget-name">${esc(t.name)}</span>` +
        `<progress class="meter" max="${total}" value="${Math.min(spent, total)}"></progress>` +
        `<span class="num">${esc(money(spent))} of ${esc(money(total, b.currency || ''))} (${esc(num(100 * ratio))}%)</span></div>`;
    });
    const html = rows.join('') || '<p class="empty">No tenants.</p>';
    if (html !== budgetsHtml) {
      $('.budget-list').innerHTML = html;
      budgetsHtml = html;
    }
  }

  function updateTenantSelect(names) {
    if (names.join('\u0000') === tenantNames.join('\u0000')) return;
    tenantNames = names;
    const select = $('#bill-tenant');
    const keep = select.value || ctx.who.tenant || names[0] || '';
    select.innerHTML = names.map((n) => `<option value="${esc(n)}">${esc(n)}</option>`).join('');
    if (names.includes(keep)) select.value = keep;
    billDirty = true;
  }

  async function loadPriceChart(signal) {
    const from = startOfTodayUtc();
    const to = Math.floor(Date.now() / 1000);
    const data = await getJSON(withQuery('/v1/history', { series: 'price_micros_per_gpu_hour', from, to }), signal);
    const models = [];
    const lines = [];
    for (const s of data.series || []) {
      const l = s.labels || {};
      if (!models.includes(l.model)) models.push(l.model);
      lines.push({
        label: `${l.model || '?'} ${l.class || ''}`.trim(),
        colour: PALETTE[models.indexOf(l.model) % PALETTE.length],
        dash: CLASS_DASH[l.class] || [],
        points: (s.points || []).map(([t, v]) => [t, v / 1e6]),
      });
    }
    lines.sort((a, b) => a.label.localeCompare(b.label));
    setLines(priceChart, lines, { from, to });
    $('.price-note').textContent = lines.length ? '' : 'No price history yet.';
  }

  async function loadBill(signal) {
    const q = billQuery();
    const note = $('.bill-note');
    const link = $('#download-csv');
    if (!q.tenant || !q.from || !q.to) {
      note.textContent = 'Choose a tenant and dates.';
      return;
    }
    let bill;
    try {
      bill = await getJSON(withQuery('/v1/bill', q), signal);
    } catch (err) {
      if (err.name === 'AbortError' || err.status === 401) throw err;
      note.textContent = `bill: ${err.message}`;
      $('.bill-table').innerHTML = '';
      setBars(billChart, [], [], []);
      link.removeAttribute('href');
      link.setAttribute('aria-disabled', 'true');
      return;
    }
    note.textContent = '';
    const cur = bill.currency || '';
    const groups = bill.groups || [];
    const row = (g, cls) => `<tr class="${cls}" data-group="${esc(g.group)}"><td>${esc(g.group)}</td><td class="num">${esc(money(g.charges))}</td>` +
      `<td class="num">${esc(money(g.credits))}</td><td class="num">${esc(money(g.net))}</td><td class="num">${esc(num(g.gpu_hours, 1))}</td>` +
      `<td class="num">${esc(num(g.entries))}</td></tr>`;
    const total = bill.total ? row({ group: 'total', ...bill.total }, 'bill-total') : '';
    $('.bill-table').innerHTML = `<table class="grid compact"><thead><tr><th>${esc(bill.by || q.by)}</th><th class="num">charges</th><th class="num">credits</th>` +
      `<th class="num">net (${esc(cur)})</th><th class="num">GPU-hours</th><th class="num">entries</th></tr></thead>` +
      `<tbody>${groups.map((g) => row(g, 'bill-group')).join('') || '<tr><td colspan="6" class="empty">No charges in these days.</td></tr>'}</tbody>` +
      `<tfoot>${total}</tfoot></table>`;
    const top = [...groups].sort((a, b) => Math.abs(b.net) - Math.abs(a.net)).slice(0, MAX_BARS);
    setBars(billChart, top.map((g) => g.group), top.map((g) => g.net), top.map((g) => (g.net < 0 ? '#009e73' : '#0072b2')));
    if (groups.length > MAX_BARS) note.textContent = `The chart shows the ${MAX_BARS} largest of ${num(groups.length)} groups.`;
    if (csvUrl) URL.revokeObjectURL(csvUrl);
    csvUrl = URL.createObjectURL(new Blob([billCsv(groups)], { type: 'text/csv' }));
    const name = `bill-${bill.tenant || q.tenant}-${bill.from || q.from}-${bill.to || q.to}-${bill.by || q.by}.csv`;
    link.setAttribute('href', csvUrl);
    link.setAttribute('download', name.replace(/[\\/:*?"<>|\s]+/g, '_'));
    link.removeAttribute('aria-disabled');
  }

  async function loadIdle(signal) {
    const box = $('.idle-table');
    let data;
    try {
      data = await getJSON(withQuery('/v1/history', { series: 'idle_milli_gpus', from: startOfTodayUtc(), to: Math.floor(Date.now() / 1000) }), signal);
    } catch (err) {
      if (err.name === 'AbortError' || err.status === 401) throw err;
      box.innerHTML = `<p class="note">Idle figures unavailable: ${esc(err.message)}</p>`;
      return;
    }
    const step = Number(data.step_s || data.interval_s || 300);
    const price = new Map((prices && prices.models ? prices.models : []).map((m) => [m.model, Number((m.per_gpu_hour || {}).standard ?? m.standard_per_gpu_hour) || 0]));
    const per = new Map();
    for (const s of data.series || []) {
      if (s.name && s.name !== 'idle_milli_gpus') continue;
      const l = s.labels || {};
      const h = gpuHours(s, step);
      if (!per.has(l.tenant)) per.set(l.tenant, { hours: 0, cost: 0, models: [] });
      const x = per.get(l.tenant);
      x.hours += h;
      x.cost += h * (price.get(l.model) || 0);
      x.models.push(`${l.model}: ${num(h, 1)} GPU-h`);
    }
    const cur = (prices && prices.currency) || '';
    const rows = [...per.entries()].sort((a, b) => b[1].cost - a[1].cost).map(([t, x]) =>
      `<tr class="idle-tenant" data-tenant="${esc(t)}" title="${esc(x.models.join('\n'))}"><td>${esc(t)}</td>` +
      `<td class="num">${esc(num(x.hours, 1))}</td><td class="num">${esc(money(x.cost, cur))}</td></tr>`);
    box.innerHTML = `<table class="grid compact"><thead><tr><th>tenant</th><th class="num">idle GPU-hours today</th><th class="num">cost at standard price</th></tr></thead>` +
      `<tbody>${rows.join('') || '<tr><td colspan="3" class="empty">No idle allocated GPUs today.</td></tr>'}</tbody></table>`;
  }

  return {
    async refresh(signal) {
      const [p, t] = await Promise.all([getJSON('/v1/prices', signal), getJSON('/v1/tenants', signal)]);
      const t0 = performance.now();
      prices = p;
      const list = t.tenants || [];
      renderPrices(p);
      renderBudgets(list);
      const names = list.map((x) => x.name);
      if (!names.length && ctx.who.tenant) names.push(ctx.who.tenant);
      updateTenantSelect(names);
      ctx.rendered(t0);
      const slow = Date.now() - slowAt >= SLOW_EVERY_MS;
      const work = [];
      if (slow) {
        slowAt = Date.now();
        work.push(loadPriceChart(signal).catch((err) => {
          if (err.name === 'AbortError' || err.status === 401) throw err;
          $('.price-note').textContent = `price history: ${err.message}`;
        }));
        work.push(loadIdle(signal));
      }
      if (slow || billDirty) {
        billDirty = false;
        work.push(loadBill(signal));
      }
      await Promise.all(work);
    },
    unmount() {
      destroyChart(priceChart);
      destroyChart(billChart);
      if (csvUrl) URL.revokeObjectURL(csvUrl);
    },
  };
}

export default { name: 'money', title: 'Money', create };

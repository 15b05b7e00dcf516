// Queues: pending jobs by tenant and queue with why they wait, and the running jobs.
import { getJSON, withQuery } from '../api.js';
import { ago, duration, eachLimited, esc, gpus, jobLink, num, stamp, time } from '../format.js';

const PAGE = 5000;
const MAX_JOBS = 10000;
const FIRST_ROWS = 100;
const WHY_PER_TENANT = 20;
const WHY_TTL_MS = 10000;
const RUNNING_ROWS = 500;

async function listJobs(state, signal) {
  const jobs = [];
  let before = null;
  let more = false;
  for (;;) {
    const page = await getJSON(withQuery('/v1/jobs', { state, limit: PAGE, before }), signal);
    jobs.push(...(page.jobs || []));
    if (!page.next) break;
    if (jobs.length >= MAX_JOBS) {
      more = true;
      break;
    }
    before = page.next;
  }
  jobs.sort((a, b) => a.id - b.id);
  return { jobs, more };
}

function pendingSince(job) {
  const t = job.transitions || [];
  for (let i = t.length - 1; i >= 0; i--) if (t[i].state === 'pending') return t[i].at_ms;
  return job.submitted_ms || 0;
}

function jobGpuMilli(job) {
  const s = job.spec || {};
  // A MIG instance's share comes with the job (task_gpu_milli); a spec without gpu_milli: whole.
  return (s.tasks || 0) * (s.gpus_per_task || 0) * (job.task_gpu_milli ?? s.gpu_milli ?? 1000);
}

function lastWith(job, state) {
  const t = job.transitions || [];
  for (let i = t.length - 1; i >= 0; i--) if (t[i].state === state) return t[i];
  return null;
}

function nodesOf(job) {
  const names = [];
  for (const p of job.placement || []) if (!names.includes(p.node)) names.push(p.node);
  return names;
}

function create(root, ctx) {
  let pending = { jobs: [], more: false };
  let running = { jobs: [], more: false };
  const showAll = new Set();
  let allRunning = false;
  const why = new Map(); // id -> { at, data }

  root.addEventListener('click', (e) => {
    const button = e.target.closest('button[data-action]');
    if (!button || !root.contains(button)) return;
    if (button.dataset.action === 'show-all') {
      const t = button.dataset.tenant;
      if (showAll.has(t)) showAll.delete(t);
      else showAll.add(t);
    } else if (button.dataset.action === 'show-all-running') {
      allRunning = !allRunning;
    }
    render(Date.now());
  });

  function whyCells(id) {
    const w = why.get(id);
    if (!w || !w.data) return '<td class="why-pos"></td><td class="why-ahead"></td><td class="why-start"></td>';
    const d = w.data;
    let pos = '';
    let ahead = '';
    if (d.lane) {
      const l = d.lane;
      pos = `${num(l.position)} of ${num(l.pending)}`;
      if (l.promoted) pos += ' <span class="tag">promoted</span>';
      const ids = (l.ahead || []).slice(0, 5).map(jobLink);
      if ((l.ahead || []).length > 5) ids.push(`+${num(l.ahead.length - 5)}`);
      if (l.ahead_hidden) ids.push(`<span class="muted">+${num(l.ahead_hidden)} hidden</span>`);
      ahead = ids.join(' ');
    }
    const start = d.estimated_start_ms
      ? `<span title="${esc(stamp(d.estimated_start_ms))}">${esc(time(d.estimated_start_ms))}</span>` : '';
    const order = d.lane ? ` title="${esc(`order ${d.lane.order}; rank: ${d.lane.rank ?? ''}`)}"` : '';
    return `<td class="why-pos"${order}>${pos}</td><td class="why-ahead">${ahead}</td><td class="why-start">${start}</td>`;
  }

  function pendingRow(job, now, withWhy) {
    const s = job.spec || {};
    const p = job.pending || {};
    const waited = (now - pendingSince(job)) / 1000;
    const attr = withWhy ? ' data-why=""' : '';
    return `<tr class="pending-job" data-job="${esc(job.id)}" data-kind="${esc(p.kind || '')}"${attr}>` +
      `<td class="num">${jobLink(job.id)}</td><td class="name">${esc(s.name)}</td><td>${esc(s.queue)}</td>` +
      `<td class="num">${esc(gpus(jobGpuMilli(job)))}</td><td><span class="kind">${esc(p.kind || '')}</span></td>` +
      `<td class="reason">${esc(p.reason || '')}</td><td class="num">${esc(duration(waited))}</td>` +
      `${withWhy ? whyCells(job.id) : '<td></td><td></td><td></td>'}</tr>`;
  }

  function tenantSection(tenant, jobs, now) {
    const queues = new Map();
    const kinds = new Set();
    const total = { count: 0, waited: {} };
    for (const job of jobs) {
      const q = (job.spec && job.spec.queue) || '';
      if (!queues.has(q)) queues.set(q, { count: 0, waited: {} });
      const g = queues.get(q);
      const kind = (job.pending && job.pending.kind) || 'unknown';
      kinds.add(kind);
      const w = Math.max(0, (now - pendingSince(job)) / 1000);
      for (const x of [g, total]) {
        x.count += 1;
        x.waited[kind] = (x.waited[kind] || 0) + w;
      }
    }
    const kindList = [...kinds].sort();
    const groupRow = (name, g, cls) => `<tr class="${cls}" data-queue="${esc(name)}"><td>${esc(name)}</td><td class="num">${num(g.count)}</td>` +
      kindList.map((k) => `<td class="num">${g.waited[k] ? esc(duration(g.waited[k])) : ''}</td>`).join('') + '</tr>';
    const groups = [...queues.keys()].sort().map((q) => groupRow(q, queues.get(q), 'queue-group'));
    groups.push(groupRow('all queues', total, 'queue-total'));
    const all = showAll.has(tenant);
    const shown = all ? jobs : jobs.slice(0, FIRST_ROWS);
    const rows = shown.map((job, i) => pendingRow(job, now, i < WHY_PER_TENANT));
    const toggle = jobs.length > FIRST_ROWS
      ? `<button type="button" class="link-button" data-action="show-all" data-tenant="${esc(tenant)}">${all ? `show the first ${FIRST_ROWS}` : `show all ${num(jobs.length)}`}</button>` : '';
    return `<section class="card queue-tenant" data-tenant="${esc(tenant)}">` +
      `<h2>${esc(tenant)} <small>${num(jobs.length)} pending</small></h2>` +
      `<table class="grid compact groups"><thead><tr><th>queue</th><th class="num">pending</th>` +
      kindList.map((k) => `<th class="num" title="time pending, summed over the jobs">waited: ${esc(k)}</th>`).join('') +
      `</tr></thead><tbody>${groups.join('')}</tbody></table>` +
      `<div class="table-wrap"><table class="grid jobs"><thead><tr><th class="num">id</th><th>name</th><th>queue</th><th class="num">GPUs</th>` +
      `<th>kind</th><th>reason</th><th class="num">waited</th><th>position</th><th>ahead</th><th>est. start</th></tr></thead>` +
      `<tbody>${rows.join('')}</tbody></table></div>${toggle}</section>`;
  }

  function runningRow(job, now) {
    const s = job.spec || {};
    const nodes = nodesOf(job);
    const nodeText = nodes.slice(0, 3).join(', ') + (nodes.length > 3 ? ` +${nodes.length - 3}` : '');
    let preempt = '';
    if (job.preemptions > 0) {
      const pre = lastWith(job, 'preempted');
      const pend = lastWith(job, 'pending');
      const who = (pre && pre.reason) || job.message || '';
      preempt = `<span class="tag warn">${num(job.preemptions)}×</span> ${esc(who)}` +
        (pend && pend.reason && pend.reason !== who ? ` <span class="muted">→ ${esc(pend.reason)}</span>` : '');
    }
    const attained = job.attained_gpu_seconds !== undefined ? num(job.attained_gpu_seconds / 3600, 1) : '–';
    const ckpt = job.last_checkpoint_ms ? ago(job.last_checkpoint_ms, now) : 'none';
    return `<tr class="running-job" data-job="${esc(job.id)}"><td class="num">${jobLink(job.id)}</td>` +
      `<td class="name">${esc(s.name)}</td><td>${esc(s.tenant)}</td><td title="${esc(nodes.join(', '))}">${esc(nodeText)}</td>` +
      `<td class="num">${esc(gpus(jobGpuMilli(job)))}</td><td class="num">${attained}</td>` +
      `<td class="num" title="${esc(stamp(job.last_checkpoint_ms))}">${esc(ckpt)}</td><td class="reason">${preempt}</td></tr>`;
  }

  function render(now) {
    const byTenant = new Map();
    for (const job of pending.jobs) {
      const t = (job.spec && job.spec.tenant) || '';
      if (!byTenant.has(t)) byTenant.set(t, []);
      byTenant.get(t).push(job);
    }
    const sections = [...byTenant.keys()].sort().map((t) => tenantSection(t, byTenant.get(t), now));
    const runJobs = allRunning ? running.jobs : running.jobs.slice(0, RUNNING_ROWS);
    const runToggle = running.jobs.length > RUNNING_ROWS
      ? `<button type="button" class="link-button" data-action="show-all-running">${allRunning ? `show the first ${RUNNING_ROWS}` : `show all ${num(running.jobs.length)}`}</button>` : '';
    const capped = (x) => (x.more ? ` <small class="warn">(the first ${num(MAX_JOBS)} only)</small>` : '');
    root.innerHTML =
      `<div class="view-head"><h1>Queues</h1><span class="muted">${num(pending.jobs.length)} pending${capped(pending)} · ${num(running.jobs.length)} running${capped(running)}</span></div>` +
      `<div class="queue-tenants">${sections.join('') || '<p class="empty">No pending jobs.</p>'}</div>` +
      `<section class="card running"><h2>Running <small>${num(running.jobs.length)}</small></h2>` +
      `<div class="table-wrap"><table class="grid jobs"><thead><tr><th class="num">id</th><th>name</th><th>tenant</th><th>nodes</th><th class="num">GPUs</th>` +
      `<th class="num">attained GPU-h</th><th class="num">checkpoint</th><th>preempted</th></tr></thead>` +
      `<tbody>${runJobs.map((j) => runningRow(j, now)).join('') || '<tr><td colspan="8" class="empty">No running jobs.</td></tr>'}</tbody></table></div>${runToggle}</section>`;
  }

  // Fills the why cells of the rows of the jobs in `ids` from the cache.
  function fillWhy(ids) {
    for (const row of root.querySelectorAll('tr.pending-job[data-why]')) {
      const id = Number(row.dataset.job);
      if (!ids.has(id)) continue;
      const tpl = document.createElement('template');
      tpl.innerHTML = `<table><tr>${whyCells(id)}</tr></table>`;
      const cells = tpl.content.querySelectorAll('td');
      row.querySelector('.why-pos').replaceWith(cells[0]);
      row.querySelector('.why-ahead').replaceWith(cells[1]);
      row.querySelector('.why-start').replaceWith(cells[2]);
    }
  }

  async function fetchWhy(signal) {
    const now = Date.now();
    const wanted = [];
    for (const row of root.querySelectorAll('tr.pending-job[data-why]')) wanted.push(Number(row.dataset.job));
    const live = new Set(wanted);
    for (const id of why.keys()) if (!live.has(id)) why.delete(id);
    const stale = wanted.filter((id) => !why.has(id) || now - why.get(id).at > WHY_TTL_MS);
    await eachLimited(stale, 6, async (id) => {
      try {
        const data = await getJSON(`/v1/jobs/${id}/why`, signal);
        why.set(id, { at: Date.now(), data });
      } catch (e) {
        if (e.name === 'AbortError' || e.status === 401) throw e;
        why.set(id, { at: Date.now(), data: null });
      }
    });
    if (stale.length && ctx.isCurrent()) fillWhy(new Set(stale));
  }

  return {
    async refresh(signal) {
      const [p, r] = await Promise.all([listJobs('pending', signal), listJobs('running', signal)]);
      const t0 = performance.now();
      pending = p;
      running = r;
      render(Date.now());
      ctx.rendered(t0);
      await fetchWhy(signal);
    },
    unmount() {},
  };
}

export default { name: 'queues', title: 'Queues', create };

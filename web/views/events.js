// Events: the newest (up to LIMIT), then followed with the long poll; newest first, filtered by
// kind prefix.
import { getJSON, withQuery } from '../api.js';
import { esc, jobLink, num, stamp, time } from '../format.js';

const MAX_ROWS = 1000;
const LIMIT = 500;

function value(v) {
  if (v === null || v === undefined) return '';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

function dataHtml(data) {
  if (data === null || data === undefined) return '';
  if (typeof data !== 'object' || Array.isArray(data)) return esc(value(data));
  return Object.entries(data).map(([k, v]) => {
    let shown;
    if ((k === 'job' || k === 'array_job') && (typeof v === 'number' || /^\d+$/.test(String(v)))) shown = jobLink(v);
    else if (k === 'jobs' && Array.isArray(v)) shown = v.slice(0, 20).map(jobLink).join(' ') + (v.length > 20 ? ` +${v.length - 20}` : '');
    else shown = esc(value(v));
    return `<span class="kv"><span class="k">${esc(k)}</span>=${shown}</span>`;
  }).join(' ');
}

function prefixes(text) {
  return text.split(/[\s,]+/).filter(Boolean);
}

function matches(kind, wanted) {
  return !wanted.length || wanted.some((p) => kind.startsWith(p));
}

function create(root, ctx) {
  let seq = null;
  let first = true;
  let wanted = [];
  root.innerHTML =
    '<div class="view-head"><h1>Events</h1><form id="event-filter-form" class="inline" role="search">' +
    '<input id="event-filter" type="search" placeholder="kind prefix: job. node. budget." aria-label="filter by kind prefix" autocomplete="off"></form>' +
    '<span class="muted event-count"></span></div>' +
    '<div class="table-wrap"><table class="grid events"><thead><tr><th>time</th><th>seq</th><th>kind</th><th>data</th></tr></thead><tbody></tbody></table></div>';
  const tbody = root.querySelector('tbody');
  const count = root.querySelector('.event-count');

  root.querySelector('#event-filter-form').addEventListener('submit', (e) => e.preventDefault());
  root.querySelector('#event-filter').addEventListener('input', (e) => {
    wanted = prefixes(e.target.value.trim());
    for (const row of tbody.rows) row.classList.toggle('hidden', !matches(row.dataset.kind || '', wanted));
  });

  function rowHtml(ev) {
    const kind = String(ev.kind || '');
    const hidden = matches(kind, wanted) ? '' : ' hidden';
    const group = kind.split('.')[0];
    return `<tr class="event${hidden}" data-seq="${esc(ev.seq)}" data-kind="${esc(kind)}">` +
      `<td class="num" title="${esc(stamp(ev.at_ms))}">${esc(time(ev.at_ms))}</td><td class="num">${esc(ev.seq)}</td>` +
      `<td><span class="ev-kind" data-group="${esc(group)}">${esc(kind)}</span></td><td class="ev-data">${dataHtml(ev.data)}</td></tr>`;
  }

  return {
    pollDelay: 0,
    async refresh(signal) {
      if (seq === null) {
        // Where the stream is now (the events from now on: none yet, and the last seq), so that
        // the first page is the newest LIMIT, not the oldest of a busy hour.
        const now = await getJSON(withQuery('/v1/events', { since_ms: Date.now(), timeout: '0s', limit: 1 }), signal);
        seq = Math.max(0, Number(now.last_seq || 0) - LIMIT);
      }
      // The first page at once (the view renders even with nothing to show), then long polls.
      const url = withQuery('/v1/events', { since: seq, timeout: first ? '0s' : '25s', limit: LIMIT });
      first = false;
      const data = await getJSON(url, signal);
      const t0 = performance.now();
      const events = data.events || [];
      if (data.last_seq !== undefined && data.last_seq !== null) seq = data.last_seq;
      else if (events.length) seq = events[events.length - 1].seq;
      else if (seq === null) seq = 0;
      if (events.length) {
        const fresh = events.slice(-MAX_ROWS).reverse().map(rowHtml).join('');
        tbody.insertAdjacentHTML('afterbegin', fresh);
        let extra = tbody.rows.length - MAX_ROWS;
        while (extra-- > 0) tbody.lastElementChild.remove();
      }
      count.textContent = `${num(tbody.rows.length)} shown · last seq ${seq}`;
      ctx.rendered(t0);
    },
    unmount() {},
  };
}

export default { name: 'events', title: 'Events', create };

// Formatting helpers shared by the views: escaping, numbers, durations, times, money.

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

// Escapes any value for use in HTML text or a quoted attribute. null/undefined read as ''.
export function esc(value) {
  if (value === null || value === undefined) return '';
  const s = String(value);
  return /[&<>"']/.test(s) ? s.replace(/[&<>"']/g, (c) => ESCAPES[c]) : s;
}

// The 12 tenant colours (the same as .c0 .. .c11 in app.css): Okabe-Ito and Paul Tol's
// colour-blind safe sets.
export const PALETTE = [
  '#0072b2', '#e69f00', '#009e73', '#cc79a7', '#56b4e9', '#d55e00',
  '#f0e442', '#332288', '#117733', '#882255', '#44aa99', '#999933',
];

export function colourIndex(i) {
  return ((i % 12) + 12) % 12;
}

// The pool view's tenant order (GET /v1/pool), so that other views colour a tenant alike.
const tenantOrder = new Map();

export function rememberTenantOrder(names) {
  tenantOrder.clear();
  names.forEach((n, i) => tenantOrder.set(n, i));
}

// A tenant's colour class index: its place in the pool's order when known, else `fallback`.
export function tenantColour(name, fallback) {
  return colourIndex(tenantOrder.has(name) ? tenantOrder.get(name) : fallback);
}

const FORMATS = new Map();

function formatter(digits) {
  let f = FORMATS.get(digits);
  if (!f) {
    f = new Intl.NumberFormat('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
    FORMATS.set(digits, f);
  }
  return f;
}

export function num(n, digits = 0) {
  if (n === null || n === undefined || n === '' || Number.isNaN(Number(n))) return '–';
  return formatter(digits).format(Number(n));
}

function trim(v) {
  if (Number.isInteger(v) && Math.abs(v) < 1000) return String(v);
  return num(v, 3).replace(/\.?0+$/, '');
}

// GPUs from thousandths: 1000 -> "1", 500 -> "0.5", 1250 -> "1.25".
export function gpus(milli) {
  if (milli === null || milli === undefined) return '–';
  const m = Number(milli);
  if (Number.isInteger(m) && m >= 0 && m < 1000000) return String(m / 1000);
  return trim(m / 1000);
}

// A number of GPUs as the API gives it (may be fractional).
export function gpuCount(n) {
  if (n === null || n === undefined) return '–';
  return trim(Number(n));
}

export function pct(part, whole, digits = 0) {
  if (!whole) return '–';
  return `${num((100 * part) / whole, digits)}%`;
}

// Seconds as "2d 4h", "3h 5m", "4m 2s", "12s".
export function duration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(Number(seconds))) return '–';
  let s = Math.max(0, Math.floor(Number(seconds)));
  if (s < 60) return `${s}s`;
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  if (d > 0) return h ? `${d}d ${h}h` : `${d}d`;
  if (h > 0) return m ? `${h}h ${m}m` : `${h}h`;
  return s ? `${m}m ${s}s` : `${m}m`;
}

export function durationMs(ms) {
  return duration(Number(ms) / 1000);
}

// How long ago a time in ms since the epoch was ("in ..." when ahead); 0 or absent reads as "never".
export function ago(ms, now = Date.now()) {
  if (!ms) return 'never';
  if (ms > now + 1000) return `in ${duration((ms - now) / 1000)}`;
  return `${duration((now - ms) / 1000)} ago`;
}

// A number with leading zeros to `w` digits: pad(7) is "07".
export function pad(n, w = 2) {
  return String(n).padStart(w, '0');
}

// Local time: "14:03:07" today, "2025-12-06 14:03" otherwise.
export function time(ms, now = Date.now()) {
  if (!ms) return '–';
  const d = new Date(ms);
  const today = new Date(now);
  const hms = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  if (d.toDateString() === today.toDateString()) return hms;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${hms}`;
}

// Full local timestamp for tooltips.
export function stamp(ms) {
  if (!ms) return '';
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// A Date as the UTC day "YYYY-MM-DD".
export function utcDay(date) {
  return `${date.getUTCFullYear()}-${pad(date.getUTCMonth() + 1)}-${pad(date.getUTCDate())}`;
}

// Unix seconds of the start of today (UTC).
export function startOfTodayUtc(now = Date.now()) {
  const d = new Date(now);
  return Math.floor(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()) / 1000);
}

export function money(amount, currency = '') {
  if (amount === null || amount === undefined || amount === '') return '–';
  const text = num(amount, 2);
  return currency ? `${text} ${currency}` : text;
}

// A CSV field: quoted when it holds a comma, quote or line break.
export function csvField(value) {
  const s = value === null || value === undefined ? '' : String(value);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

// A job id as a link to its page.
export function jobLink(id) {
  const n = esc(id);
  return `<a href="#/job/${n}" class="job-link" data-job="${n}">${n}</a>`;
}

// Runs fn over items with at most `limit` calls in flight; resolves when all have settled.
export async function eachLimited(items, limit, fn) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      try {
        await fn(items[i], i);
      } catch (e) {
        if (e && e.name === 'AbortError') throw e;
      }
    }
  };
  const workers = [];
  for (let i = 0; i < Math.min(limit, items.length); i++) workers.push(worker());
  await Promise.all(workers);
}

// Small helpers over Chart.js 3 (the global `Chart`): line and bar charts updated in place.
import { pad } from './format.js';

function available() {
  return typeof window !== 'undefined' && typeof window.Chart === 'function';
}

// Unix seconds as local "HH:MM", or "MM-DD HH:MM" when `withDay`.
export function clockLabel(seconds, withDay = false) {
  const d = new Date(seconds * 1000);
  const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  return withDay ? `${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${hm}` : hm;
}

const BASE = {
  animation: false,
  responsive: true,
  maintainAspectRatio: false,
  normalized: true,
  plugins: {
    legend: { position: 'bottom', labels: { boxWidth: 10, boxHeight: 10, font: { size: 11 } } },
  },
};

// A line chart whose x axis is Unix seconds. opts: yTitle, yFormat(v), withDay (bool or fn).
export function lineChart(canvas, opts = {}) {
  if (!available() || !canvas) return null;
  const yFormat = opts.yFormat || ((v) => v);
  const withDay = typeof opts.withDay === 'function' ? opts.withDay : () => !!opts.withDay;
  return new window.Chart(canvas, {
    type: 'line',
    data: { datasets: [] },
    options: {
      ...BASE,
      interaction: { mode: 'nearest', axis: 'x', intersect: false },
      elements: { point: { radius: 0, hitRadius: 4 }, line: { borderWidth: 1.5, tension: 0 } },
      scales: {
        x: {
          type: 'linear',
          ticks: { maxTicksLimit: 8, callback: (v) => clockLabel(v, withDay()), font: { size: 10 } },
          grid: { color: '#eef0f3' },
        },
        y: {
          beginAtZero: true,
          title: { display: !!opts.yTitle, text: opts.yTitle || '', font: { size: 11 } },
          ticks: { callback: (v) => yFormat(v), font: { size: 10 } },
          grid: { color: '#eef0f3' },
        },
      },
      plugins: {
        ...BASE.plugins,
        tooltip: {
          callbacks: {
            title: (items) => (items.length ? clockLabel(items[0].parsed.x, true) : ''),
            label: (item) => `${item.dataset.label}: ${yFormat(item.parsed.y)}`,
          },
        },
      },
    },
  });
}

const STEPS = [60, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800];

// Sets a line chart's datasets in place: [{label, points: [[x, y], ...], colour, dash}]; the x
// axis spans `from`..`to` (Unix seconds) when given, else the points, with ticks at round times.
export function setLines(chart, lines, { from, to } = {}) {
  if (!chart) return;
  let lo = from ?? Infinity;
  let hi = to ?? -Infinity;
  if (from === undefined || to === undefined) {
    for (const l of lines) {
      for (const [x] of l.points) {
        if (from === undefined && x < lo) lo = x;
        if (to === undefined && x > hi) hi = x;
      }
    }
  }
  const x = chart.options.scales.x;
  if (Number.isFinite(lo) && Number.isFinite(hi) && hi > lo) {
    x.min = lo;
    x.max = hi;
    x.ticks.stepSize = STEPS.find((s) => (hi - lo) / s <= 8) || 604800;
  } else {
    delete x.min;
    delete x.max;
    delete x.ticks.stepSize;
  }
  const byLabel = new Map(chart.data.datasets.map((d) => [d.label, d]));
  const next = lines.map((l) => {
    const data = l.points.map(([x, y]) => ({ x, y }));
    // A short history (a server just started) shows its samples as dots.
    const pointRadius = data.length < 30 ? 2.5 : 0;
    const old = byLabel.get(l.label);
    if (old) {
      old.data = data;
      old.pointRadius = pointRadius;
      old.borderColor = l.colour;
      old.backgroundColor = l.colour;
      old.borderDash = l.dash || [];
      return old;
    }
    return {
      label: l.label,
      data,
      borderColor: l.colour,
      backgroundColor: l.colour,
      borderDash: l.dash || [],
      pointRadius,
      fill: false,
    };
  });
  chart.data.datasets = next;
  chart.update('none');
}

// A bar chart of one dataset. opts: yFormat(v), label.
export function barChart(canvas, opts = {}) {
  if (!available() || !canvas) return null;
  const yFormat = opts.yFormat || ((v) => v);
  return new window.Chart(canvas, {
    type: 'bar',
    data: { labels: [], datasets: [{ label: opts.label || '', data: [], backgroundColor: [] }] },
    options: {
      ...BASE,
      plugins: {
        legend: { display: false },
        tooltip: { callbacks: { label: (item) => `${item.dataset.label}: ${yFormat(item.parsed.y)}` } },
      },
      scales: {
        x: { ticks: { autoSkip: true, maxRotation: 45, font: { size: 10 } }, grid: { display: false } },
        y: { ticks: { callback: (v) => yFormat(v), font: { size: 10 } }, grid: { color: '#eef0f3' } },
      },
    },
  });
}

// Sets a bar chart's bars in place.
export function setBars(chart, labels, values, colours) {
  if (!chart) return;
  chart.data.labels = labels;
  const ds = chart.data.datasets[0];
  ds.data = values;
  ds.backgroundColor = colours;
  chart.update('none');
}

export function destroyChart(chart) {
  if (chart) chart.destroy();
}

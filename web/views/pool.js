// The pool: figures, tenant legend, and every node's GPUs by spine and leaf (GET /v1/pool).
import { getJSON } from '../api.js';
import { colourIndex, esc, gpus, num, pct, rememberTenantOrder, stamp } from '../format.js';

const STATE_LABEL = { ready: 'ready', not_ready: 'not ready', drained: 'drained', starting: 'starting' };

// The fill level of a fractional GPU, rounded to a quarter (at least a quarter when used).
function quarter(milli) {
  return Math.min(100, Math.max(25, Math.round(milli / 250) * 25));
}

function shareText(s, tenants) {
  if (s.tenant < 0 || !tenants[s.tenant]) return `other tenant · ${gpus(s.milli)} GPU`;
  const t = tenants[s.tenant].name;
  const job = s.job !== undefined && s.job !== null ? `job ${s.job}` : 'job ?';
  const name = s.name ? ` "${s.name}"` : '';
  return `${job}${name} · ${t} · ${gpus(s.milli)} GPU (${s.milli} milli)${s.borrowed ? ' · borrowed' : ''}`;
}

function cellHtml(i, shares, tenants) {
  if (!shares || shares.length === 0) {
    return `<span class="gpu free" data-gpu="${i}" data-tenant="" data-job="" title="GPU ${i}: free"></span>`;
  }
  let total = 0;
  let main = shares[0];
  let borrowed = false;
  for (const s of shares) {
    total += s.milli || 0;
    if ((s.milli || 0) > (main.milli || 0)) main = s;
    if (s.borrowed) borrowed = true;
  }
  let cls = 'gpu';
  let tenant;
  if (main.tenant < 0 || !tenants[main.tenant]) {
    cls += ' other';
    tenant = '(other)';
  } else {
    cls += ` c${colourIndex(main.tenant)}`;
    tenant = tenants[main.tenant].name;
  }
  if (borrowed) cls += ' b';
  if (shares.length > 1 || total < 1000) cls += ` frac f${quarter(total)}`;
  if (shares.length > 1) cls += ' multi';
  const lines = [`GPU ${i}: ${gpus(total)} GPU in use`];
  for (const s of shares) lines.push(shareText(s, tenants));
  const job = main.job !== undefined && main.job !== null ? main.job : '';
  return `<span class="${cls}" data-gpu="${i}" data-tenant="${esc(tenant)}" data-job="${esc(job)}" title="${esc(lines.join('\n'))}"></span>`;
}

function nodeUse(node) {
  let milli = 0;
  for (const cell of node.cells || []) for (const s of cell) milli += s.milli || 0;
  return milli;
}

function nodeHtml(node, tenants) {
  const state = node.state || 'ready';
  const cells = node.cells || [];
  const n = Math.max(node.gpus || 0, cells.length);
  const parts = [];
  for (let i = 0; i < n; i++) parts.push(cellHtml(i, cells[i], tenants));
  const reason = node.reason ? String(node.reason) : '';
  const title = `${node.name} · ${node.model || '?'} · ${n} GPUs · ${STATE_LABEL[state] || state}` +
    (reason ? `\n${reason}` : '');
  const stateBadge = state === 'ready' ? '' : `<span class="node-state">${esc(STATE_LABEL[state] || state)}</span>`;
  const why = stateBadge || reason
    ? `<span class="node-why">${stateBadge}${reason ? `<span class="node-reason">${esc(reason)}</span>` : ''}</span>` : '';
  return `<div class="node" data-part="n:${esc(node.name)}" data-node="${esc(node.name)}" data-state="${esc(state)}" title="${esc(title)}">` +
    `<span class="node-name">${esc(node.name)}</span><span class="node-model">${esc(node.model || '')}</span>` +
    `<span class="gpus">${parts.join('')}</span>${why}</div>`;
}

function summary(nodes) {
  let gpuCount = 0;
  let milli = 0;
  let down = 0;
  for (const node of nodes) {
    gpuCount += node.gpus || 0;
    milli += nodeUse(node);
    if (node.state && node.state !== 'ready') down += 1;
  }
  const downText = down ? ` · ${num(down)} not taking jobs` : '';
  return `${num(nodes.length)} nodes · ${num(gpuCount)} GPUs · ${pct(milli, gpuCount * 1000)} allocated${downText}`;
}

function figure(key, label, value, sub, extra = '') {
  return `<div class="figure" data-figure="${key}"><span class="fig-label">${esc(label)}</span>` +
    `<span class="fig-value">${esc(value)}</span><span class="fig-sub">${esc(sub)}</span>${extra}</div>`;
}

function headHtml(data, tenants) {
  const f = data.figures || {};
  const total = (f.gpus || 0) * 1000;
  const alloc = f.allocated_milli || 0;
  const figures = [
    figure('allocated', 'Allocated', pct(alloc, total, 1), `${gpus(alloc)} of ${num(f.gpus || 0)} GPUs`,
      `<progress class="meter" max="${total || 1}" value="${alloc}"></progress>`),
    figure('free', 'Free GPUs', num(f.free_gpus), 'whole GPUs unused'),
    figure('fragmented', 'Fragmented', num(f.fragmented_gpus), 'free on partly used nodes'),
    figure('nodes', 'Nodes ready', `${num(f.nodes_ready)} / ${num(f.nodes)}`,
      `${num(f.nodes_not_ready)} not ready · ${num(f.nodes_drained)} drained`),
    figure('jobs', 'Jobs running', num(f.jobs_running), `${num(f.jobs_pending)} pending`),
  ];
  const legend = tenants.map((t, i) => {
    const borrowing = t.borrowing && t.borrowing.length ? ` <small>borrowing ${esc(t.borrowing.join(', '))}</small>` : '';
    return `<li data-tenant="${esc(t.name)}"><span class="swatch gpu c${colourIndex(i)}"></span>${esc(t.name)}${borrowing}</li>`;
  });
  legend.push('<li><span class="swatch gpu free"></span>free</li>');
  legend.push('<li><span class="swatch gpu other"></span>other tenant</li>');
  legend.push('<li><span class="swatch gpu c0 b"></span>borrowed (above guarantee)</li>');
  legend.push('<li><span class="swatch gpu c0 frac f50"></span>fractional</li>');
  const at = data.at_ms ? `<span class="as-of">as of ${esc(stamp(data.at_ms))}</span>` : '';
  return `<div class="figures">${figures.join('')}</div><ul class="legend">${legend.join('')}${at}</ul>`;
}

function create(root, ctx) {
  let shape = null; // the node layout's signature: a change re-renders everything
  let parts = new Map(); // part key -> html
  let els = null; // part key -> element, built on the first partial update

  root.addEventListener('click', (e) => {
    const cell = e.target.closest('.gpu[data-job]');
    if (cell && cell.dataset.job && root.contains(cell)) ctx.navigate(`#/job/${cell.dataset.job}`);
  });

  function build(data) {
    const tenants = data.tenants || [];
    rememberTenantOrder(tenants.map((t) => t.name));
    const next = new Map();
    const shapeParts = [];
    const body = [];
    next.set('head', headHtml(data, tenants));
    const groups = [];
    for (const spine of data.spines || []) {
      const leaves = [];
      for (const leaf of spine.leaves || []) leaves.push({ name: leaf.name, nodes: leaf.nodes || [] });
      groups.push({ name: spine.name, leaves, rented: false });
    }
    if (data.rented && data.rented.length) {
      groups.push({ name: 'Rented burst nodes', leaves: [{ name: '', nodes: data.rented }], rented: true });
    }
    for (const g of groups) {
      const spineKey = `s:${g.name}`;
      shapeParts.push(spineKey);
      const all = [];
      for (const leaf of g.leaves) all.push(...leaf.nodes);
      next.set(spineKey, `<span class="sum" data-part="${esc(spineKey)}">${esc(summary(all))}</span>`);
      const leafHtml = [];
      for (const leaf of g.leaves) {
        const leafKey = `l:${g.name}/${leaf.name}`;
        shapeParts.push(leafKey);
        next.set(leafKey, `<span class="sum" data-part="${esc(leafKey)}">${esc(summary(leaf.nodes))}</span>`);
        const nodes = [];
        for (const node of leaf.nodes) {
          const key = `n:${node.name}`;
          shapeParts.push(key);
          const html = nodeHtml(node, tenants);
          next.set(key, html);
          nodes.push(html);
        }
        const leafTitle = leaf.name ? `<h3>${esc(leaf.name)} ${next.get(leafKey)}</h3>` : `<h3>${next.get(leafKey)}</h3>`;
        leafHtml.push(`<div class="leaf" data-leaf="${esc(leaf.name)}">${leafTitle}<div class="nodes">${nodes.join('')}</div></div>`);
      }
      const cls = g.rented ? 'spine rented' : 'spine';
      body.push(`<section class="${cls}" data-spine="${esc(g.name)}"><h2>${esc(g.name)} ${next.get(spineKey)}</h2>${leafHtml.join('')}</section>`);
    }
    if (!groups.length) body.push('<p class="empty">The pool has no nodes.</p>');
    return { next, shapeKey: shapeParts.join('\u0000'), body: body.join('') };
  }

  function render(data) {
    const { next, shapeKey, body } = build(data);
    if (shapeKey !== shape) {
      root.innerHTML = `<div class="pool-head" data-part="head">${next.get('head')}</div><div class="pool-body">${body}</div>`;
      shape = shapeKey;
      parts = next;
      els = null;
      return;
    }
    const changed = [];
    for (const [key, html] of next) if (parts.get(key) !== html) changed.push(key);
    if (!changed.length) return;
    if (!els) {
      els = new Map();
      for (const el of root.querySelectorAll('[data-part]')) els.set(el.dataset.part, el);
    }
    const head = changed.indexOf('head');
    if (head >= 0) {
      els.get('head').innerHTML = next.get('head');
      changed.splice(head, 1);
    }
    if (changed.length) {
      const tpl = document.createElement('template');
      tpl.innerHTML = changed.map((k) => next.get(k)).join('');
      const fresh = Array.from(tpl.content.children);
      changed.forEach((key, i) => {
        const old = els.get(key);
        if (old && fresh[i]) {
          old.replaceWith(fresh[i]);
          els.set(key, fresh[i]);
        }
      });
    }
    parts = next;
  }

  return {
    async refresh(signal) {
      const data = await getJSON('/v1/pool', signal);
      const t0 = performance.now();
      render(data);
      ctx.rendered(t0);
    },
    unmount() {},
  };
}

export default { name: 'pool', title: 'Pool', create };

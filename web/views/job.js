// One job: spec, state, transitions, placement, figures, why it waits, cancel, and its task logs.
import { getJSON, request } from '../api.js';
import { ago, duration, durationMs, esc, gpus, jobLink, num, stamp, time } from '../format.js';

const FINAL = new Set(['succeeded', 'failed', 'cancelled']);
const LOG_TAIL = 65536;
const LOG_JUMP = 262144; // further behind than this, skip to the tail
const MAX_LINES = 2000;
const OPEN_LOGS = 8; // tasks whose log is open (and followed) at first
const MAX_TRANSITIONS = 100;

function dl(pairs) {
  return `<dl class="facts">${pairs
    .filter(([, v]) => v !== null && v !== undefined && v !== '')
    .map(([k, v]) => `<dt>${esc(k)}</dt><dd>${v}</dd>`)
    .join('')}</dl>`;
}

function text(v) {
  if (v === null || v === undefined || v === '') return '';
  return esc(v);
}

function when(ms) {
  if (!ms) return '';
  return `<span title="${esc(stamp(ms))}">${esc(time(ms))}</span> <span class="muted">(${esc(ago(ms))})</span>`;
}

function specHtml(s) {
  const models = Array.isArray(s.gpu_model) ? s.gpu_model : (s.gpu_models || []);
  const labels = Object.entries(s.labels || {}).map(([k, v]) => `<span class="tag">${esc(k)}=${esc(v)}</span>`).join(' ');
  const command = Array.isArray(s.command) ? s.command.join(' ') : s.command;
  const topo = s.topology ? `${s.topology.within || ''}${s.topology.mode ? ` (${s.topology.mode})` : ''}` : '';
  return dl([
    ['name', text(s.name)],
    ['tenant', text(s.tenant)],
    ['queue', text(s.queue)],
    ['class', text(s.class)],
    ['priority', text(s.priority)],
    ['tasks', text(s.tasks)],
    ['GPUs per task', text(s.gpus_per_task)],
    ['GPU share', s.mig_profile ? `a MIG ${esc(s.mig_profile)} instance`
      : s.gpu_milli !== undefined ? `${esc(gpus(s.gpu_milli))} of each GPU` : ''],
    ['GPU models', models.length ? esc(models.join(', ')) : 'any'],
    ['CPU per task', s.cpu_milli_per_task !== undefined ? esc(`${s.cpu_milli_per_task / 1000} cores`) : ''],
    ['memory per task', s.memory_mib_per_task !== undefined ? esc(`${num(s.memory_mib_per_task)} MiB`) : ''],
    ['topology', text(topo)],
    ['runtime estimate', text(s.runtime_estimate)],
    ['max runtime', text(s.max_runtime)],
    ['max cost', text(s.max_cost)],
    ['preemptible', s.preemptible === undefined ? '' : (s.preemptible ? 'yes' : 'no')],
    ['checkpoint interval', text(s.checkpoint_interval)],
    ['command', command ? `<code>${esc(command)}</code>` : ''],
    ['working dir', text(s.working_dir)],
    ['labels', labels],
    ['after', Array.isArray(s.after_ok) ? s.after_ok.map(jobLink).join(' ') : ''],
    ['array', text(s.array)],
  ]);
}

function timelineHtml(transitions, now) {
  const all = transitions || [];
  const shown = all.slice(-MAX_TRANSITIONS);
  const items = shown.map((t, i) => {
    const next = i + 1 < shown.length ? shown[i + 1].at_ms : null;
    const lasted = next ? durationMs(next - t.at_ms) : (FINAL.has(t.state) ? '' : `${durationMs(now - t.at_ms)} so far`);
    return `<li class="transition" data-state="${esc(t.state)}"><span class="t-state">${esc(t.state)}</span>` +
      `<span class="t-time" title="${esc(stamp(t.at_ms))}">${esc(time(t.at_ms, now))}</span>` +
      `${lasted ? `<span class="t-dur">${esc(lasted)}</span>` : ''}` +
      `${t.reason ? `<span class="t-reason">${esc(t.reason)}</span>` : ''}</li>`;
  });
  const more = all.length > shown.length ? `<p class="muted">the last ${MAX_TRANSITIONS} of ${num(all.length)} transitions</p>` : '';
  return `${more}<ol class="timeline">${items.join('')}</ol>`;
}

function placementHtml(places, title) {
  if (!places || !places.length) return '';
  const rows = places.map((p, i) => `<tr><td class="num">${i}</td><td>${esc(p.node)}</td><td>${esc((p.gpus || []).join(', '))}</td></tr>`);
  return `<h3>${esc(title)}</h3><table class="grid compact placement"><thead><tr><th class="num">task</th><th>node</th><th>GPUs</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

function whyHtml(w) {
  if (!w) return '';
  const waited = Object.entries(w.waited_seconds || {}).map(([k, v]) => `<span class="tag">${esc(k)} ${esc(duration(v))}</span>`).join(' ');
  let lane = '';
  if (w.lane) {
    const l = w.lane;
    const ahead = (l.ahead || []).map(jobLink).join(' ');
    const hidden = l.ahead_hidden ? ` <span class="muted">+${num(l.ahead_hidden)} not yours</span>` : '';
    lane = dl([
      ['position', `<span class="position">${esc(`${num(l.position)} of ${num(l.pending)}`)}</span>${l.promoted ? ' <span class="tag">promoted</span>' : ''}`],
      ['order', text(l.order)],
      ['rank', text(l.rank)],
      ['attained', l.attained_gpu_seconds !== undefined ? esc(`${num(l.attained_gpu_seconds / 3600, 2)} GPU-h`) : ''],
      ['ahead', ahead + hidden || '–'],
    ]);
  }
  return `<section class="card why"><h2>Why it waits</h2>` + dl([
    ['kind', `<span class="kind">${text(w.kind)}</span>`],
    ['reason', text(w.reason)],
    ['waited', waited],
    ['pending for', w.pending_seconds !== undefined ? esc(duration(w.pending_seconds)) : ''],
    ['estimated start', w.estimated_start_ms ? when(w.estimated_start_ms) : ''],
  ]) + lane + '</section>';
}

function create(root, ctx) {
  const id = /^\d+$/.test(ctx.arg) ? ctx.arg : null;
  let mode = null; // 'job' | 'missing'
  let main = null;
  let logsEl = null;
  let armed = false;
  let armTimer = null;
  let busy = false;
  let job = null;
  const logs = new Map(); // task -> state

  function notFound() {
    mode = 'missing';
    logs.clear();
    root.innerHTML = `<p class="not-found">job ${esc(ctx.arg)}: not found (or not yours)</p>`;
  }

  function skeleton() {
    mode = 'job';
    root.innerHTML = '<div class="job-main"></div><section class="card logs-section"><h2>Logs</h2><div class="logs"></div></section>';
    main = root.querySelector('.job-main');
    logsEl = root.querySelector('.logs');
    logs.clear();
  }

  function cancelButton() {
    if (!job || !(job.state === 'pending' || job.state === 'running')) return '';
    return `<button type="button" id="cancel-job" class="danger${armed ? ' armed' : ''}"${busy ? ' disabled' : ''}>${armed ? 'Really cancel?' : 'Cancel job'}</button>`;
  }

  function disarm() {
    armed = false;
    clearTimeout(armTimer);
    const b = root.querySelector('#cancel-job');
    if (b) {
      b.textContent = 'Cancel job';
      b.classList.remove('armed');
    }
  }

  root.addEventListener('click', async (e) => {
    const b = e.target.closest('#cancel-job');
    if (!b || !root.contains(b) || busy) return;
    if (!armed) {
      armed = true;
      b.textContent = 'Really cancel?';
      b.classList.add('armed');
      clearTimeout(armTimer);
      armTimer = setTimeout(disarm, 5000);
      return;
    }
    disarm();
    busy = true;
    b.disabled = true;
    try {
      await request('DELETE', `/v1/jobs/${id}`);
      ctx.clearError();
    } catch (err) {
      if (err.status !== 401) ctx.showError(err);
    } finally {
      busy = false;
      b.disabled = false;
      ctx.refreshNow();
    }
  });

  // What a job reported of its steps (step_summary: docs/step-telemetry.md).
  function stepsHtml(steps) {
    if (!steps || !steps.steps) return '';
    const ms = (us) => `${num(us / 1000, 1)} ms`;
    return esc(`${steps.steps} reported; p50 ${ms(steps.p50_us)}, p90 ${ms(steps.p90_us)}, ` +
      `p99 ${ms(steps.p99_us)}`);
  }

  // The advice for the job (GET /v1/jobs/ID/advice): each with its numbers, else why none.
  function adviceHtml(advice) {
    if (!advice) return '';
    const lines = Array.isArray(advice.advice) ? advice.advice : [];
    let html = lines.length
      ? `<ul class="advice">${lines.map((l) => `<li>${esc(l)}</li>`).join('')}</ul>`
      : esc(advice.note || 'none');
    if (typeof advice.mfu_now === 'number' && typeof advice.mfu_expected === 'number' &&
        advice.mfu_expected > advice.mfu_now) {
      html += esc(` (MFU ${num(100 * advice.mfu_now, 1)}% now, ` +
        `${num(100 * advice.mfu_expected, 1)}% with the advice)`);
    }
    return html;
  }

  function renderMain(j, why, now, advice) {
    const raw = main.querySelector('details.raw');
    const open = raw ? raw.open : false;
    const s = j.spec || {};
    const attained = j.attained_gpu_seconds ?? j.ended_runs_gpu_seconds;
    const facts = dl([
      ['state', `<span class="state" data-state="${esc(j.state)}">${esc(j.state)}</span>`],
      ['submitted', when(j.submitted_ms)],
      ['submitter', text(j.submitter || j.submitter_token)],
      ['started', when(j.started_ms)],
      ['ended', FINAL.has(j.state) ? when(j.ended_ms) : ''],
      ['starts', text(j.starts)],
      ['preemptions', text(j.preemptions)],
      ['lost work', j.lost_work_ms ? esc(durationMs(j.lost_work_ms)) : ''],
      ['attained', attained !== undefined ? esc(`${num(attained / 3600, 2)} GPU-h`) : ''],
      ['checkpoint step', text(j.checkpoint_step)],
      ['checkpoint path', j.checkpoint_path ? `<code>${esc(j.checkpoint_path)}</code>` : ''],
      ['last checkpoint', when(j.last_checkpoint_ms)],
      ['exit code', text(j.exit_code)],
      ['steps', stepsHtml(j.step_summary)],
      ['comm share', j.step_summary?.comm_share !== undefined
        ? esc(`${num(100 * j.step_summary.comm_share, 1)}% of step time`) : ''],
      ['MFU', j.step_summary?.mfu !== undefined ? esc(`${num(100 * j.step_summary.mfu, 1)}%`) : ''],
      ['advice', adviceHtml(advice)],
      ['message', text(j.message)],
      ['held', text(j.held)],
      ['array', j.array_job ? `${jobLink(j.array_job)} index ${esc(j.array_index)}` : ''],
      ['ran on', Array.isArray(j.ran_on) ? esc(j.ran_on.join(', ')) : ''],
      ['faults', text(j.faults)],
      ['pending', j.pending ? `<span class="kind">${esc(j.pending.kind)}</span> ${esc(j.pending.reason)}` : ''],
    ]);
    main.innerHTML =
      `<div class="view-head"><h1>Job ${esc(j.id)} <small>${esc(s.name)}</small></h1>` +
      `<span class="state" data-state="${esc(j.state)}">${esc(j.state)}</span>${cancelButton()}</div>` +
      `<section class="card timeline-card"><h2>Transitions</h2>${timelineHtml(j.transitions, now)}</section>` +
      (j.state === 'pending' ? whyHtml(why) : '') +
      `<div class="columns"><section class="card"><h2>Run</h2>${facts}` +
      `${placementHtml(j.placement, 'placement')}${placementHtml(j.last_placement, 'last run placement')}</section>` +
      `<section class="card"><h2>Spec</h2>${specHtml(s)}<details class="raw"${open ? ' open' : ''}><summary>spec as JSON</summary>` +
      `<pre class="json">${esc(JSON.stringify(s, null, 2))}</pre></details></section></div>`;
  }

  // --- logs ---

  function ensureLogs(j) {
    const tasks = Math.max(1, Number((j.spec || {}).tasks) || 1);
    if (logs.size === tasks) return;
    logs.clear();
    const boxes = [];
    for (let t = 0; t < tasks; t++) {
      boxes.push(`<details class="log-box" data-task="${t}"${t < OPEN_LOGS ? ' open' : ''}><summary>task ${t} <span class="log-size muted"></span></summary>` +
        `<pre class="log" data-task="${t}">loading…</pre></details>`);
    }
    logsEl.innerHTML = boxes.join('');
    for (const box of logsEl.querySelectorAll('details.log-box')) {
      const t = Number(box.dataset.task);
      logs.set(t, {
        box,
        pre: box.querySelector('pre.log'),
        size: box.querySelector('.log-size'),
        offset: null,
        skipLine: false,
        decoder: new TextDecoder(),
        lines: [],
        partial: '',
        first: true,
        empty: 0,
      });
    }
  }

  function show(st) {
    const pre = st.pre;
    const atBottom = st.first || pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
    let out = st.lines.join('\n');
    if (st.partial) out = out ? `${out}\n${st.partial}` : st.partial;
    pre.textContent = out || 'no output yet';
    if (atBottom) pre.scrollTop = pre.scrollHeight;
    st.first = false;
  }

  function append(st, buf) {
    let chunk = st.decoder.decode(buf, { stream: true });
    if (st.skipLine) {
      const nl = chunk.indexOf('\n');
      if (nl < 0) return;
      chunk = chunk.slice(nl + 1);
      st.skipLine = false;
    }
    const parts = (st.partial + chunk).split('\n');
    st.partial = parts.pop();
    for (const line of parts) st.lines.push(line);
    if (st.lines.length > MAX_LINES) st.lines.splice(0, st.lines.length - MAX_LINES);
  }

  async function readLog(task, offset, limit, signal) {
    const q = `task=${task}&offset=${offset}${limit !== undefined ? `&limit=${limit}` : ''}`;
    const res = await request('GET', `/v1/jobs/${id}/logs?${q}`, { signal });
    const size = Number(res.headers.get('X-Tidepool-Log-Size'));
    const buf = await res.arrayBuffer();
    return { size: Number.isFinite(size) ? size : offset + buf.byteLength, buf };
  }

  function restart(st, offset) {
    st.offset = offset;
    st.skipLine = offset > 0;
    st.decoder = new TextDecoder();
    st.lines = [];
    st.partial = '';
  }

  async function followLog(task, st, signal) {
    try {
      let got;
      if (st.offset === null) {
        got = await readLog(task, 0, LOG_TAIL, signal);
        if (got.size > LOG_TAIL) {
          const from = got.size - LOG_TAIL;
          got = await readLog(task, from, undefined, signal);
          restart(st, from);
        } else {
          restart(st, 0);
        }
      } else {
        got = await readLog(task, st.offset, undefined, signal);
        if (got.size < st.offset) {
          // The log is shorter than what was read: read its tail again.
          restart(st, Math.max(0, got.size - LOG_TAIL));
          got = await readLog(task, st.offset, undefined, signal);
        }
      }
      st.offset += got.buf.byteLength;
      st.size.textContent = `${num(got.size / 1024, 1)} KiB`;
      if (got.size - st.offset > LOG_JUMP) restart(st, got.size - LOG_TAIL);
      if (got.buf.byteLength || st.first) {
        st.empty = 0;
        append(st, got.buf);
        show(st);
      } else {
        st.empty += 1;
      }
    } catch (err) {
      if (err.name === 'AbortError' || err.status === 401) throw err;
      if (err.status === 404) {
        st.pre.textContent = 'no log yet';
        st.first = true;
        return;
      }
      st.pre.textContent = `cannot read the log: ${err.message}`;
    }
  }

  async function pollLogs(j, signal) {
    const ended = FINAL.has(j.state);
    const work = [];
    for (const [task, st] of logs) {
      if (!st.box.open) continue;
      if (ended && st.offset !== null && st.empty >= 2) continue;
      work.push(followLog(task, st, signal));
    }
    await Promise.all(work);
  }

  return {
    async refresh(signal) {
      if (!id) {
        const t0 = performance.now();
        notFound();
        ctx.rendered(t0);
        return;
      }
      let j;
      try {
        j = await getJSON(`/v1/jobs/${id}`, signal);
      } catch (err) {
        if (err.status !== 404) throw err;
        const t0 = performance.now();
        if (mode !== 'missing') notFound();
        ctx.rendered(t0);
        return;
      }
      let why = null;
      if (j.state === 'pending') {
        try {
          why = await getJSON(`/v1/jobs/${id}/why`, signal);
        } catch (err) {
          if (err.name === 'AbortError' || err.status === 401) throw err;
        }
      }
      let advice = null;
      if (j.state === 'running' && j.step_summary) {
        try {
          advice = await getJSON(`/v1/jobs/${id}/advice`, signal);
        } catch (err) {
          if (err.name === 'AbortError' || err.status === 401) throw err;
        }
      }
      const t0 = performance.now();
      job = j;
      if (mode !== 'job') skeleton();
      renderMain(j, why, Date.now(), advice);
      ensureLogs(j);
      ctx.rendered(t0);
      await pollLogs(j, signal);
    },
    unmount() {
      clearTimeout(armTimer);
    },
  };
}

export default { name: 'job', title: 'Job', create };

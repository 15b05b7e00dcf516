// The dashboard's shell: sign-in, navigation (hash routes), the refresh loop and the error banner.
import { request, setToken, setUnauthorizedHandler } from './api.js';
import { time } from './format.js';
import pool from './views/pool.js';
import queues from './views/queues.js';
import tenants from './views/tenants.js';
import job from './views/job.js';
import money from './views/money.js';
import events from './views/events.js';

const VIEWS = { pool, queues, tenants, job, money, events };
const TOKEN_KEY = 'tidepool.token';
const POLL_MS = 2000;

const $ = (id) => document.getElementById(id);

let who = null; // the whoami answer
let gen = 0; // bumped at each route change and sign-out: older loops stop
let current = null; // { name, instance, ctrl, inFlight, again, wake }
let updates = 0;
let stickyUntil = 0;

// --- error banner ---

function showError(err, { sticky = false } = {}) {
  const box = $('error');
  box.textContent = err && err.message ? err.message : String(err);
  box.hidden = false;
  if (sticky) stickyUntil = Date.now() + 10000;
}

function clearError(force = false) {
  if (!force && Date.now() < stickyUntil) return;
  const box = $('error');
  if (!box.hidden) {
    box.hidden = true;
    box.textContent = '';
  }
}

// --- sign-in ---

async function whoami(token) {
  const res = await request('GET', '/v1/whoami', { tokenOverride: token, quiet401: true });
  return res.json();
}

function showSignin(message) {
  $('top').hidden = true;
  $('view').hidden = true;
  clearError(true);
  $('signin-panel').hidden = false;
  $('signin-error').textContent = message || '';
  $('token').value = '';
  $('token').focus();
}

function enterApp(token, me) {
  who = me;
  setToken(token);
  const role = me.role || '?';
  let label = role;
  if (me.tenant) label += ` · ${me.tenant}`;
  if (me.node) label += ` · ${me.node}`;
  $('whoami').textContent = label;
  $('whoami').dataset.role = role;
  document.body.dataset.role = role;
  document.querySelector('#nav a[data-view="money"]').hidden = !me.market;
  $('signin-panel').hidden = true;
  $('signin-error').textContent = '';
  $('top').hidden = false;
  $('view').hidden = false;
  route();
}

function stopView() {
  gen++;
  if (current) {
    if (current.ctrl) current.ctrl.abort();
    if (current.wake) current.wake();
    try {
      if (current.instance && current.instance.unmount) current.instance.unmount();
    } catch (e) {
      console.error(e);
    }
    current = null;
  }
}

function signOut(message) {
  stopView();
  sessionStorage.removeItem(TOKEN_KEY);
  setToken(null);
  who = null;
  delete document.body.dataset.role;
  showSignin(message);
}

async function onSignin(e) {
  e.preventDefault();
  const input = $('token');
  const token = input.value.trim();
  const button = e.target.querySelector('button');
  if (!token) return;
  button.disabled = true;
  $('signin-error').textContent = '';
  try {
    const me = await whoami(token);
    sessionStorage.setItem(TOKEN_KEY, token);
    input.value = '';
    enterApp(token, me);
  } catch (err) {
    input.value = '';
    $('signin-error').textContent =
      err.status === 401 ? `Token refused: ${err.message}` : `Cannot sign in: ${err.message}`;
  } finally {
    button.disabled = false;
  }
}

// --- routing ---

function parseRoute() {
  const h = location.hash.replace(/^#\/?/, '');
  const [name, ...rest] = h.split('/');
  if (name && VIEWS[name]) {
    let arg = rest.join('/');
    try {
      arg = decodeURIComponent(arg);
    } catch {
      /* keep it raw */
    }
    return { name, arg };
  }
  return { name: 'pool', arg: '' };
}

function freshRoot() {
  const old = $('view');
  const root = document.createElement('main');
  root.id = 'view';
  root.dataset.loading = '';
  old.replaceWith(root);
  return root;
}

function route() {
  if (!who) return;
  stopView();
  clearError(true);
  stickyUntil = 0;
  const { name, arg } = parseRoute();
  const spec = VIEWS[name];
  for (const a of document.querySelectorAll('#nav a[data-view]')) {
    const on = a.dataset.view === name;
    a.classList.toggle('active', on);
    if (on) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  document.title = `${spec.title || name} · Tidepool`;
  const root = freshRoot();
  const myGen = gen;
  let first = true;
  const ctx = {
    who,
    arg,
    root,
    // Call once the view's DOM shows the data that arrived at t0 (performance.now()).
    rendered(t0) {
      if (myGen !== gen) return;
      if (first) {
        first = false;
        root.dataset.view = name;
        delete root.dataset.loading;
        performance.mark(`tp:${name}:first`);
      } else if (t0 !== undefined) {
        performance.measure(`tp:${name}:update`, { start: t0, end: performance.now() });
      }
    },
    isCurrent: () => myGen === gen,
    refreshNow() {
      if (myGen !== gen || !current) return;
      if (current.inFlight) current.again = true;
      else if (current.wake) current.wake();
    },
    showError: (err) => showError(err, { sticky: true }),
    clearError: () => clearError(true),
    navigate(hash) {
      location.hash = hash;
    },
  };
  let instance;
  try {
    instance = spec.create(root, ctx);
  } catch (err) {
    showError(err);
    return;
  }
  current = { name, instance, ctrl: null, inFlight: false, again: false, wake: null };
  loop(myGen, current);
}

// --- refresh loop ---

function bump() {
  updates += 1;
  document.body.dataset.updates = String(updates);
}

function sleep(state, ms) {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      state.wake = null;
      resolve();
    }
    state.wake = done;
  });
}

function waitVisible(state) {
  return new Promise((resolve) => {
    const on = () => {
      if (document.visibilityState !== 'hidden') finish();
    };
    function finish() {
      document.removeEventListener('visibilitychange', on);
      state.wake = null;
      resolve();
    }
    document.addEventListener('visibilitychange', on);
    state.wake = finish;
  });
}

// Refreshes the view, then waits its delay (2 s; 0 for a long poll) after the refresh ended:
// never two refreshes at once, nothing while the tab is hidden.
async function loop(myGen, state) {
  const { instance } = state;
  while (myGen === gen) {
    if (document.visibilityState === 'hidden') {
      $('updated').textContent = 'paused';
      await waitVisible(state);
      continue;
    }
    const ctrl = new AbortController();
    state.ctrl = ctrl;
    state.inFlight = true;
    state.again = false;
    let failed = false;
    try {
      await instance.refresh(ctrl.signal);
      if (myGen !== gen) return;
      clearError();
      $('updated').textContent = time(Date.now());
    } catch (err) {
      if (myGen !== gen) return;
      if (err && err.status === 401) return; // signed out by the handler
      if (err && err.name === 'AbortError') {
        failed = true;
      } else {
        console.error(err);
        showError(err);
        failed = true;
      }
    } finally {
      state.inFlight = false;
      state.ctrl = null;
    }
    if (myGen !== gen) return;
    bump();
    if (state.again) continue;
    const delay = failed ? POLL_MS : instance.pollDelay ?? POLL_MS;
    await sleep(state, delay);
  }
}

// --- start ---

function onFindJob(e) {
  e.preventDefault();
  const input = $('find-job-id');
  const id = input.value.trim().replace(/^#/, '');
  if (/^\d+$/.test(id)) {
    input.classList.remove('invalid');
    input.value = '';
    location.hash = `#/job/${id}`;
  } else {
    input.classList.add('invalid');
  }
}

async function start() {
  setUnauthorizedHandler(() => {
    if (who) signOut('The server refused the token (401): sign in again.');
  });
  $('signin').addEventListener('submit', onSignin);
  $('signout').addEventListener('click', () => signOut(''));
  $('find-job').addEventListener('submit', onFindJob);
  window.addEventListener('hashchange', route);
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (!token) {
    showSignin('');
    return;
  }
  try {
    const me = await whoami(token);
    enterApp(token, me);
  } catch (err) {
    if (err.status === 401) sessionStorage.removeItem(TOKEN_KEY);
    showSignin(err.status === 401 ? `Token refused: ${err.message}` : `Cannot reach the server: ${err.message}`);
  }
}

start();

// The fetch wrapper: bearer token, JSON, and errors thrown with the server's error/field/reason.

let token = null;
let onUnauthorized = null;

export function setToken(value) {
  token = value;
}

// Called (once per refused request) when the server answers 401.
export function setUnauthorizedHandler(fn) {
  onUnauthorized = fn;
}

export class ApiError extends Error {
  constructor(status, body, path) {
    const b = body && typeof body === 'object' ? body : {};
    const parts = [b.error || `HTTP ${status}`];
    if (b.field) parts.push(`(${b.field})`);
    let text = parts.join(' ');
    if (b.reason) text += `: ${b.reason}`;
    super(text);
    this.name = 'ApiError';
    this.status = status;
    this.error = b.error || '';
    this.field = b.field || '';
    this.reason = b.reason || '';
    this.path = path;
    this.body = b;
  }
}

// Sends a request; answers the Response when its status is 2xx, throws ApiError otherwise.
// `tokenOverride` checks a token that is not the signed-in one (sign-in).
export async function request(method, path, { signal, body, tokenOverride, quiet401 } = {}) {
  const headers = { Authorization: `Bearer ${tokenOverride ?? token ?? ''}` };
  let payload;
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  const res = await fetch(path, {
    method,
    headers,
    body: payload,
    signal,
    cache: 'no-store',
    credentials: 'omit',
  });
  if (res.ok) return res;
  let parsed = null;
  try {
    parsed = await res.json();
  } catch {
    parsed = null;
  }
  const err = new ApiError(res.status, parsed, path);
  if (res.status === 401 && !quiet401 && onUnauthorized) onUnauthorized(err);
  throw err;
}

export async function getJSON(path, signal) {
  const res = await request('GET', path, { signal });
  return res.json();
}

// Builds "path?k=v&..." leaving out null/undefined values.
export function withQuery(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== null && v !== undefined && v !== '') q.set(k, String(v));
  }
  const text = q.toString();
  return text ? `${path}?${text}` : path;
}

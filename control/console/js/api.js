// The API client: the session kept in sessionStorage, the bearer header on every call,
// the account header for principals that act in a chosen account, and the error envelope.

const KEY = 'callsmith.console';

/**
 * The session: {token, kind, confirmed, email?, tenant?, account?, accountName?}. `kind` comes from
 * the token's prefix: superuser (cs_su_), tenant key (cs_tk_), account key (cs_ak_) or a
 * user's session (cs_se_). Only the superuser and tenant keys need a chosen account.
 */
export function session() {
  try {
    return JSON.parse(sessionStorage.getItem(KEY) || 'null');
  } catch {
    return null;
  }
}

export function saveSession(s) {
  if (s) sessionStorage.setItem(KEY, JSON.stringify(s));
  else sessionStorage.removeItem(KEY);
}

export function tokenKind(token) {
  const prefixes = {cs_su_: 'superuser', cs_tk_: 'tenant_key', cs_ak_: 'account_key', cs_se_: 'user'};
  for (const [p, k] of Object.entries(prefixes)) if (token.startsWith(p)) return k;
  return null;
}

/** Whether the principal must pick an account before account-scoped pages. */
export function needsAccount(s) {
  return !!s && (s.kind === 'superuser' || s.kind === 'tenant_key');
}

/** An error answered by the API, carrying its envelope. */
export class ApiError extends Error {
  constructor(status, body, fallback) {
    const env = body && typeof body === 'object' ? body : {};
    super(env.message || fallback || `HTTP ${status}`);
    this.status = status;
    this.error = env.error || `http_${status}`;
    this.code = env.code;
    this.data = env.data;
  }
}

/**
 * Headers of an authenticated request: the bearer token, and X-Account-Sid for principals
 * acting in a chosen account unless the request names a tenant itself (the superuser's
 * account list, which must not be scoped by the account chosen before).
 */
export function authHeaders(extra = {}) {
  const s = session();
  /** @type {Record<string, string>} */
  const headers = {...extra};
  if (s && s.token) headers.Authorization = `Bearer ${s.token}`;
  if (s && s.account && needsAccount(s) && !('X-Tenant-Sid' in headers)) headers['X-Account-Sid'] = s.account;
  return headers;
}

/**
 * A raw authenticated fetch (for streams and audio); throws ApiError on a non-2xx answer.
 * @param {string} method
 * @param {string} path
 * @param {{body?: any, form?: FormData, headers?: Record<string, string>, signal?: AbortSignal}} [opts]
 *   `body` is sent as JSON, `form` as multipart/form-data.
 * @returns {Promise<Response>}
 */
export async function request(method, path, {body, form, headers = {}, signal} = {}) {
  /** @type {RequestInit & {headers: Record<string, string>}} */
  const init = {method, headers: authHeaders(headers), signal};
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  } else if (form) {
    init.body = form;
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, null, `the service did not answer (${e.message})`);
  }
  if (!resp.ok) {
    let env = null;
    const text = await resp.text().catch(() => '');
    try {
      env = JSON.parse(text);
    } catch {
      env = null;
    }
    const err = new ApiError(resp.status, env, text.slice(0, 200) || resp.statusText);
    if (resp.status === 401 && session() && session().confirmed) window.dispatchEvent(new CustomEvent('callsmith:unauthenticated', {detail: err}));
    throw err;
  }
  return resp;
}

/** A JSON call: the parsed answer (null for 204). */
export async function api(method, path, body, headers) {
  const resp = await request(method, path, {body, headers});
  if (resp.status === 204) return null;
  const text = await resp.text();
  return text ? JSON.parse(text) : null;
}

export const get = (path, headers) => api('GET', path, undefined, headers);
export const post = (path, body) => api('POST', path, body);
export const put = (path, body) => api('PUT', path, body);

/** A query string of the non-empty values of `params` ('' when none). */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== '' && v !== null && v !== undefined) q.set(k, v);
  }
  const t = q.toString();
  return t ? `?${t}` : '';
}

/** Logs in with email and password; returns the new session. */
export async function loginWithPassword(email, password) {
  const r = await fetch('/v1/auth/login', {
    method: 'POST',
    headers: {'Content-Type': 'application/json'},
    body: JSON.stringify({email, password}),
  });
  const text = await r.text();
  let body = null;
  try {
    body = JSON.parse(text);
  } catch {
    body = null;
  }
  if (!r.ok) throw new ApiError(r.status, body, text);
  const s = {token: body.session_token, kind: 'user', email: body.email, account: body.account_sid, tenant: body.tenant_sid, confirmed: true};
  saveSession(s);
  return s;
}

/** Takes a pasted bearer token after checking that the API accepts it. */
export async function loginWithToken(token) {
  token = token.trim();
  const kind = tokenKind(token);
  if (!kind) throw new ApiError(0, null, 'not a callsmith token (expected cs_su_, cs_tk_, cs_ak_ or cs_se_…)');
  // Unconfirmed until a request every principal of its kind may make is accepted; a 401
  // then is this login's failure, not the end of a session.
  saveSession({token, kind});
  const probe = {superuser: '/v1/internal/tenant?limit=1', tenant_key: '/v1/internal/account?limit=1',
    account_key: '/v1/scenario?limit=1', user: '/v1/profile'}[kind];
  try {
    const r = await get(probe);
    const s = {token, kind, confirmed: true};
    if (kind === 'user') Object.assign(s, {email: r.user.email, account: r.account.sid, accountName: r.account.name});
    saveSession(s);
    return s;
  } catch (e) {
    saveSession(null);
    throw e;
  }
}

/** Ends the session: a user's session is revoked on the server, a key is only forgotten. */
export async function logout() {
  const s = session();
  try {
    if (s && s.kind === 'user') await post('/v1/auth/logout');
  } finally {
    saveSession(null);
  }
}

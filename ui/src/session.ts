// The signed-in session. The token lives in memory and in sessionStorage (so a reload of the
// tab keeps it, a closed tab forgets it); never in localStorage or a cookie a script can read.
import { computed, signal } from '@preact/signals';
import { api, setApiHooks } from './api.js';
import { here, navigate, safeNext } from './router.js';
import type { Context, LoginResult, Operation, Permission, SessionInfo } from './types.js';

export interface Session {
  token: string;
  username: string;
  expiresAt?: string;
  permissions: Permission[];
  mfa: { enabled: boolean; enforced: boolean };
}

const STORAGE_KEY = 'gatewayd.session';
/** Where to go after a single sign-on round trip (the page the SSO button was pressed on). */
const SSO_NEXT_KEY = 'gatewayd.sso-next';

export const session = signal<Session | null>(null);
/** Why the user is on the sign-in page (session expired, SSO error …), shown there. */
export const signInNotice = signal<{ kind: 'info' | 'error'; text: string } | null>(null);

let expiryTimer: ReturnType<typeof setTimeout> | undefined;

function store(next: Session | null): void {
  session.value = next;
  clearTimeout(expiryTimer);
  if (!next) {
    sessionStorage.removeItem(STORAGE_KEY);
    return;
  }
  sessionStorage.setItem(STORAGE_KEY, JSON.stringify({ token: next.token }));
  if (next.expiresAt) {
    const ms = Date.parse(next.expiresAt) - Date.now();
    // setTimeout holds at most ~24.8 days; sessions are hours.
    if (ms > 0 && ms < 2 ** 31 - 1) expiryTimer = setTimeout(() => expire('Your session expired. Sign in again to continue.'), ms);
  }
}

setApiHooks({
  token: () => session.value?.token,
  // A 401 may also mean "current password is wrong" or "invalid OTP": the session is over only
  // when the API no longer knows the token.
  unauthorized: () => {
    const token = session.value?.token;
    if (!token) return;
    api('GET', '/api/session', { token }).catch((err: { status?: number }) => {
      if (err.status === 401 && session.value?.token === token) expire('Your session has ended. Sign in again to continue.');
    });
  },
});

/** Reads the session of a token from the API and keeps it. */
export async function adopt(token: string): Promise<Session> {
  const info = await api<SessionInfo>('GET', '/api/session', { token });
  const next: Session = { token, username: info.username, expiresAt: info.expiresAt, permissions: info.permissions, mfa: info.mfa };
  store(next);
  return next;
}

/** At start: the token of this tab, if it is still valid. */
export async function restoreSession(): Promise<void> {
  let token: string | undefined;
  try {
    token = (JSON.parse(sessionStorage.getItem(STORAGE_KEY) ?? 'null') as { token?: string } | null)?.token;
  } catch {
    token = undefined;
  }
  if (!token) return;
  try {
    await adopt(token);
  } catch {
    store(null);
  }
}

/** The session ended under the user (expiry, revocation, restore): sign in again, then come back. */
export function expire(text: string): void {
  if (!session.value) return;
  const back = here();
  store(null);
  signInNotice.value = { kind: 'info', text };
  navigate(`/signin?next=${encodeURIComponent(back)}`, { replace: true });
}

export async function signIn(result: LoginResult, next: string | null): Promise<void> {
  if (!result.token) throw new Error('the login result carries no token');
  await adopt(result.token);
  signInNotice.value = null;
  navigate(safeNext(next), { replace: true });
}

export async function signOut(): Promise<void> {
  const current = session.value;
  store(null);
  if (current) await api('POST', '/api/logout', { body: { token: current.token }, auth: false }).catch(() => {});
  signInNotice.value = { kind: 'info', text: 'You are signed out.' };
  navigate('/signin', { replace: true });
}

export function rememberSsoReturn(next: string | null): void {
  sessionStorage.setItem(SSO_NEXT_KEY, safeNext(next));
}

/**
 * The identity provider's redirect lands on the UI with `#token=…&expiresAt=…` or `#error=…`
 * (docs/security.md, "Single sign-on (OpenID Connect)"). The fragment is removed from the
 * address bar at once.
 */
export async function takeSsoLanding(): Promise<boolean> {
  const hash = window.location.hash.slice(1);
  if (!hash) return false;
  const params = new URLSearchParams(hash);
  const token = params.get('token');
  const error = params.get('error');
  if (!token && !error) return false;
  const next = sessionStorage.getItem(SSO_NEXT_KEY);
  sessionStorage.removeItem(SSO_NEXT_KEY);
  window.history.replaceState(null, '', window.location.pathname + window.location.search);
  if (error) {
    signInNotice.value = { kind: 'error', text: `Single sign-on failed: ${error}` };
    navigate(`/signin${next && next !== '/' ? `?next=${encodeURIComponent(next)}` : ''}`, { replace: true });
    return true;
  }
  try {
    await adopt(token!);
    navigate(safeNext(next), { replace: true });
  } catch (err) {
    signInNotice.value = { kind: 'error', text: `Single sign-on failed: ${(err as Error).message}` };
    navigate('/signin', { replace: true });
  }
  return true;
}

// ------------------------------------------------------------------------ what the user may do

/** MQTT-style level matching, as the gateway's engine does for http permissions (docs/design.md §4). */
export function patternMatches(pattern: string, path: string): boolean {
  const p = pattern.split('/');
  const t = path.split('/');
  for (let i = 0; i < p.length; i++) {
    const level = p[i]!;
    if (level === '#') return i === p.length - 1;
    if (i >= t.length) return false;
    if (level !== '+' && level !== t[i]) return false;
  }
  return p.length === t.length;
}

function includes(granted: Operation, wanted: 'read' | 'write'): boolean {
  return granted === 'readWrite' || granted === wanted;
}

/**
 * Whether the session's permissions allow `wanted` on an http path: only to hide what would
 * answer 403 anyway. The API decides; the UI shows its answer when they disagree.
 */
export function can(wanted: 'read' | 'write', path: string, context: Context = 'http'): boolean {
  const s = session.value;
  if (!s) return false;
  return s.permissions.some((p) => p.context === context && includes(p.operation, wanted) && patternMatches(p.resource, path));
}

export const signedIn = computed(() => session.value !== null);

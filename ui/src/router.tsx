// History routing: real paths (/users/42) that can be bookmarked and reloaded (the daemon answers
// index.html for the first segments in src/http/web-ui.ts), leaving the URL fragment to the
// contract's single sign-on handoff (#token=… / #error=…).
import { signal } from '@preact/signals';
import type { AnchorHTMLAttributes, ComponentChildren } from 'preact';

export interface Location {
  path: string;
  query: URLSearchParams;
}

function current(): Location {
  return { path: window.location.pathname.replace(/\/+$/, '') || '/', query: new URLSearchParams(window.location.search) };
}

export const location = signal<Location>(current());

window.addEventListener('popstate', () => {
  location.value = current();
});

/** Moves to a path of the UI (with its query) without a reload. */
export function navigate(to: string, options: { replace?: boolean } = {}): void {
  if (options.replace) window.history.replaceState(null, '', to);
  else window.history.pushState(null, '', to);
  location.value = current();
  if (!options.replace) window.scrollTo(0, 0);
}

/** The current path with its query: where to come back to after a sign-in. */
export function here(): string {
  return window.location.pathname + window.location.search;
}

/** Only a path of this UI is a place to go back to (no //host, no scheme). */
export function safeNext(next: string | null | undefined): string {
  return next && next.startsWith('/') && !next.startsWith('//') && !next.startsWith('/signin') ? next : '/';
}

/** `/users/:id` against `/users/42` → {id: '42'}; null when it does not match. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const want = pattern.split('/');
  const got = path.split('/');
  if (want.length !== got.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const w = want[i]!;
    if (w.startsWith(':')) params[w.slice(1)] = decodeURIComponent(got[i]!);
    else if (w !== got[i]) return null;
  }
  return params;
}

export function Link(props: AnchorHTMLAttributes<HTMLAnchorElement> & { href: string; children?: ComponentChildren }) {
  const { href, onClick, ...rest } = props;
  return (
    <a
      href={href}
      {...rest}
      onClick={(e) => {
        if (typeof onClick === 'function') onClick(e);
        if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        navigate(href);
      }}
    />
  );
}

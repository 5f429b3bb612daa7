// Widgets used on several pages: pager, password rules, state badges, dates, copyable code.
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.js';
import type { Pagination, PasswordPolicy } from '../types.js';
import { Button } from './forms.js';

export function Pager(props: { pagination: Pagination | undefined; onPage: (page: number) => void; what: string }) {
  const p = props.pagination;
  if (!p) return null;
  const last = Math.max(p.totalPages, 1);
  return (
    <nav class="pager" aria-label={`Pages of ${props.what}`}>
      <Button disabled={p.currentPage <= 1} onClick={() => props.onPage(p.currentPage - 1)}>
        Previous page
      </Button>
      <span aria-live="polite">
        Page {p.currentPage} of {last} · {p.totalRows} {props.what}
      </span>
      <Button disabled={!p.nextPage} onClick={() => props.onPage(p.nextPage)}>
        Next page
      </Button>
    </nav>
  );
}

const rules: { key: keyof PasswordPolicy; what: string; count: (s: string) => number }[] = [
  { key: 'min', what: 'characters', count: (s) => [...s].length },
  { key: 'lower', what: 'lower-case letters', count: (s) => (s.match(/\p{Ll}/gu) ?? []).length },
  { key: 'upper', what: 'upper-case letters', count: (s) => (s.match(/\p{Lu}/gu) ?? []).length },
  { key: 'numeric', what: 'digits', count: (s) => (s.match(/\p{Nd}/gu) ?? []).length },
  { key: 'symbol', what: 'symbols or punctuation characters', count: (s) => (s.match(/[\p{P}\p{S}]/gu) ?? []).length },
];

/** The gateway's password policy, checked as the user types (the API checks again: 422). */
export function PasswordRules(props: { password: string; token?: string }) {
  const [policy, setPolicy] = useState<PasswordPolicy | null>(null);
  useEffect(() => {
    api<PasswordPolicy>('GET', '/api/policy/password', props.token ? { token: props.token } : {})
      .then(setPolicy)
      .catch(() => setPolicy(null));
  }, [props.token]);
  if (!policy) return null;
  const active = rules.filter((r) => policy[r.key] > 0);
  const met = active.filter((r) => r.count(props.password) >= policy[r.key]).length;
  return (
    <div class="rules">
      <p class="hint" aria-live="polite">
        Password policy: {met} of {active.length} rules met
      </p>
      <ul>
        {active.map((r) => {
          const ok = r.count(props.password) >= policy[r.key];
          return (
            <li key={r.key} class={ok ? 'ok' : 'todo'}>
              <span aria-hidden="true">{ok ? '✓' : '○'}</span> At least {policy[r.key]} {r.what}
              <span class="sr-only">{ok ? ' (met)' : ' (not met yet)'}</span>
            </li>
          );
        })}
      </ul>
    </div>
  );
}

const goodStates = new Set(['connected', 'enabled', 'born']);
const movingStates = new Set(['connecting', 'enabling', 'disconnecting', 'disabling', 'waitingForHost', 'waiting']);
const badStates = new Set(['reconnecting', 'dead']);
/** States whose API name is not a word (Sparkplug's waitingForHost). */
const stateLabels: Record<string, string> = { waitingForHost: 'waiting for host' };

export function StateBadge(props: { state: string }) {
  const kind = goodStates.has(props.state) ? 'good' : movingStates.has(props.state) ? 'moving' : badStates.has(props.state) ? 'bad' : 'off';
  return <span class={`badge ${kind}`}>{stateLabels[props.state] ?? props.state}</span>;
}

export function formatDate(value: string | number | undefined): string {
  if (value === undefined || value === '') return '—';
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) return String(value);
  return d.toLocaleString(undefined, { year: 'numeric', month: 'short', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  return h > 0 ? `${h} h ${String(m).padStart(2, '0')} min` : `${m}:${String(sec).padStart(2, '0')} min`;
}

/** A byte count in words: 512 B, 3.4 KB, 8 GB (decimal units, as flash is sold). */
export function formatBytes(n: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) {
    n /= 1000;
    i++;
  }
  return `${i === 0 ? Math.round(n) : n.toFixed(n < 10 ? 1 : 0)} ${units[i]}`;
}

export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** A long value (fingerprint, id) in a monospace box that wraps. */
export function Code(props: { children: string }) {
  return <code class="wrap">{props.children}</code>;
}

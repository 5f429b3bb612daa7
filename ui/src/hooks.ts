// Small hooks shared by the pages: loading data, running an action, polling, a ticking clock.
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';

export interface Async<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload: () => Promise<void>;
  set: (data: T) => void;
}

/** Loads `load()` when `deps` change; the last call wins (an older answer never overwrites a newer one). */
export function useAsync<T>(load: () => Promise<T>, deps: unknown[]): Async<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const generation = useRef(0);
  const loader = useRef(load);
  loader.current = load;

  const reload = useCallback(async () => {
    const mine = ++generation.current;
    setLoading(true);
    try {
      const value = await loader.current();
      if (mine !== generation.current) return;
      setData(value);
      setError(null);
    } catch (err) {
      if (mine === generation.current) setError(err);
    } finally {
      if (mine === generation.current) setLoading(false);
    }
  }, []);

  useEffect(() => {
    void reload();
    return () => {
      generation.current++;
    };
  }, deps);

  return { data, error, loading, reload, set: setData };
}

export interface Action {
  busy: boolean;
  error: unknown;
  /** The last success message, for a role=status line. */
  done: string | null;
  run: (work: () => Promise<string | void>) => Promise<boolean>;
  clear: () => void;
}

/** Runs one user action at a time and keeps its outcome (the API's message on failure). */
export function useAction(): Action {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState<string | null>(null);
  const mounted = useRef(true);
  useEffect(() => () => void (mounted.current = false), []);
  const run = useCallback(async (work: () => Promise<string | void>) => {
    setBusy(true);
    setError(null);
    setDone(null);
    try {
      const message = await work();
      if (mounted.current) setDone(message ?? null);
      return true;
    } catch (err) {
      if (mounted.current) setError(err);
      return false;
    } finally {
      if (mounted.current) setBusy(false);
    }
  }, []);
  return { busy, error, done, run, clear: () => (setError(null), setDone(null)) };
}

/**
 * Calls `tick` every `ms` while the tab is visible (and once when it becomes visible again).
 * Live states use polling rather than server-sent events: EventSource cannot send the
 * Authorization header, and a token in a URL would end up in logs.
 */
export function usePoll(tick: () => void | Promise<void>, ms: number, enabled = true): void {
  const saved = useRef(tick);
  saved.current = tick;
  useEffect(() => {
    if (!enabled) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let stopped = false;
    const loop = async () => {
      timer = undefined;
      if (document.visibilityState === 'visible') {
        try {
          await saved.current();
        } catch {
          // the page shows its own error; keep polling
        }
      }
      if (!stopped) timer = setTimeout(loop, ms);
    };
    const onVisible = () => {
      if (document.visibilityState === 'visible' && timer !== undefined) {
        clearTimeout(timer);
        void loop();
      }
    };
    timer = setTimeout(loop, ms);
    document.addEventListener('visibilitychange', onVisible);
    return () => {
      stopped = true;
      clearTimeout(timer);
      document.removeEventListener('visibilitychange', onVisible);
    };
  }, [ms, enabled]);
}

/** Date.now(), refreshed every `ms` (countdowns). */
export function useNow(ms = 1000): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(timer);
  }, [ms]);
  return now;
}

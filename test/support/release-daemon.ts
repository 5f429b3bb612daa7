// A gatewayd daemon process of any release (an earlier one built by scripts/releases.ts, or this
// build), started on a data directory with a configuration file holding only the keys that
// release knows (earlier releases refuse a key they do not have), resolved at its ready line,
// with an API client on its HTTP port and its JSON log lines.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';

export interface ReleaseDaemon {
  child: ChildProcess;
  ready: Record<string, any>;
  lines: Record<string, any>[];
  stderr(): string;
  exited: Promise<number | null>;
  api<T = any>(method: string, path: string, options?: { token?: string; body?: unknown; raw?: string; headers?: Record<string, string> }): Promise<{ status: number; body: T }>;
  login(username: string, password: string): Promise<string>;
  /** SIGTERM; resolves with the exit code. */
  stop(): Promise<number | null>;
}

type Json = Record<string, unknown>;

/** `wanted` with only the keys (deeply) that `known` has: what a release's config/default.json accepts. */
export function knownKeys(wanted: Json, known: Json): Json {
  const out: Json = {};
  for (const [k, v] of Object.entries(wanted)) {
    if (!(k in known)) continue;
    const base = known[k];
    out[k] = v && typeof v === 'object' && !Array.isArray(v) && base && typeof base === 'object' && !Array.isArray(base) ? knownKeys(v as Json, base as Json) : v;
  }
  return out;
}

/** Writes `<file>` with the keys of `wanted` that the release whose main is `main` knows. */
export function writeReleaseConfig(main: string, file: string, wanted: Json): void {
  const releaseRoot = join(dirname(main), '../..');
  const defaults = JSON.parse(readFileSync(join(releaseRoot, 'config/default.json'), 'utf8')) as Json;
  writeFileSync(file, JSON.stringify(knownKeys(wanted, defaults), null, 2));
}

/** Runs `node <main>` with GATEWAYD_CONFIG=<configFile>; rejects with its stderr if it exits before ready. */
export async function startReleaseDaemon(main: string, configFile: string, cwd: string, readyTimeoutMs = 60_000): Promise<ReleaseDaemon> {
  const child = spawn(process.execPath, [main], { cwd, env: { PATH: process.env.PATH ?? '', GATEWAYD_CONFIG: configFile }, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const lines: Record<string, any>[] = [];
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const ready = await new Promise<Record<string, any>>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${main} not ready within ${readyTimeoutMs} ms: ${stderr}`)), readyTimeoutMs);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      try {
        const entry = JSON.parse(line) as Record<string, any>;
        lines.push(entry);
        if (entry.message === 'ready') {
          clearTimeout(timer);
          resolve(entry);
        }
      } catch {
        lines.push({ unparsed: line });
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${main} exited with ${code} before ready: ${stderr}`));
    });
  });
  const baseUrl = `http://127.0.0.1:${ready.http as number}`;
  const api: ReleaseDaemon['api'] = async (method, path, options = {}) => {
    const headers: Record<string, string> = { ...(options.headers ?? {}) };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    let body: string | undefined = options.raw;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] = 'application/json';
    }
    const res = await fetch(baseUrl + path, { method, headers, ...(body !== undefined ? { body } : {}) });
    const text = await res.text();
    return { status: res.status, body: (text && (res.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text) : text) as never };
  };
  return {
    child,
    ready,
    lines,
    stderr: () => stderr,
    exited,
    api,
    async login(username, password) {
      const res = await api('POST', '/api/login', { body: { username, password } });
      if (res.status !== 200) throw new Error(`login of ${username}: ${res.status} ${JSON.stringify(res.body)}`);
      return (res.body as { token: string }).token;
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

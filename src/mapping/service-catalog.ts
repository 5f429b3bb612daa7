// The services directory as the source of truth (docs/design.md §13). The catalog knows every service
// file, runs the valid ones and keeps the runtime in step with the directory:
// - the directory is watched (fs.watch); once it has been quiet for the debounce time it is read
//   again and a new, changed or removed file is applied without a restart. Editors that save by
//   rename are expected; a file caught half-written does not validate and is refused (the
//   running version stays) until the write completes and is seen;
// - the API writes files atomically and applies them before it answers;
// - a file that does not validate is refused as a whole (logged, or 400 for the API) and the
//   version that ran before keeps running.
// Every change goes through one queue: a scan, a write and a removal never interleave.
import { mkdirSync, readFileSync, statSync, unlinkSync, watch, type FSWatcher } from 'node:fs';
import { basename, extname, join } from 'node:path';
import { BadRequestError, ConflictError, NotFoundError } from '../errors/errors.js';
import type { Logger } from '../log/index.js';
import { writeFileAtomicAsync } from '../store/write-file-atomic.js';
import type { ResourceChanges } from './definition-diff.js';
import { loadServiceDir, type ServiceFile } from './service-dir.js';
import { parseServiceFile, SERVICE_ID, ServiceFileError, type FileProblem, type ParseOptions, type ServiceDef } from './service-files.js';
import { redactSecrets, restoreSecrets } from './service-secrets.js';

/** A service as GET /api/services lists it. */
export interface ServiceSummary {
  id: string;
  description?: string;
  /** The file's name in the services directory. */
  file: string;
  /** applied: the file on disk runs; refused: it does not validate (problems), an earlier version may run. */
  state: 'applied' | 'refused';
  problems: { path: string; message: string }[];
  /** Whether a version of the service runs (when refused: the last one that validated, if any). */
  running: boolean;
  /** The resources of the running version, by type. */
  resources: { connections: number; endpoints: number; mappings: number; servers: number; nodes: number; sparkplug: number; bridges: number };
  /** Last modification of the file (epoch ms). */
  modifiedAt: number;
}

export interface ServiceValidation {
  valid: boolean;
  problems: { path: string; message: string }[];
  /** Valid: what applying it would change. */
  changes?: ResourceChanges;
}

export interface ServiceCatalog {
  /** Reads the directory (at start): the services to run. Refused files are logged. */
  load(): ServiceDef[];
  /** Starts watching the directory (mapping.watch). */
  watch(): void;
  /** Stops watching; changes queued after this are dropped. */
  close(): Promise<void>;
  list(): ServiceSummary[];
  /** The file's text as it is on disk now, its passwords redacted (service-secrets.ts). */
  read(id: string): { text: string; summary: ServiceSummary };
  /**
   * Validates, writes atomically, applies; resolves when the runtime runs it. A redacted
   * password in `text` stands for the one the file has there.
   */
  put(id: string, text: string): Promise<{ created: boolean; summary: ServiceSummary; changes: ResourceChanges }>;
  validate(id: string, text: string): ServiceValidation;
  remove(id: string): Promise<ResourceChanges>;
  /** Reads the directory again now and applies what changed (what the watcher does). */
  rescan(): Promise<void>;
}

interface Entry {
  id: string;
  file: string;
  /** The text last read or written. */
  text: string;
  modifiedAt: number;
  /** The version that runs (the file's when it validates, else the one before, if any). */
  running: ServiceDef | undefined;
  /** Problems of the text on disk (empty when it runs). */
  problems: FileProblem[];
}

const asIssues = (problems: FileProblem[]) => problems.map((p) => ({ path: p.path, message: p.reason }));
/** While the directory does not exist, how often it is looked for (ms). */
const DIRECTORY_POLL_MS = 2000;

export function createServiceCatalog(deps: {
  dir: string;
  log: Logger;
  /** Runs these services instead of the current ones (the runtime's apply). */
  apply: (services: ServiceDef[]) => Promise<ResourceChanges>;
  /** What apply would change. */
  plan: (services: ServiceDef[]) => ResourceChanges;
  debounceMs: number;
  /** Checks that need the gateway's state (a Bridge's runAs user). */
  parseOptions?: ParseOptions;
}): ServiceCatalog {
  const parseOptions = deps.parseOptions ?? {};
  const { dir, log } = deps;
  const entries = new Map<string, Entry>();
  /** Refused files that have no entry (bad name, duplicate id), by file: logged once per text. */
  const strays = new Map<string, string>();
  let queue: Promise<unknown> = Promise.resolve();
  let closed = false;
  let watcher: FSWatcher | undefined;
  let dirPoll: NodeJS.Timeout | undefined;
  let debounce: NodeJS.Timeout | undefined;
  let watching = false;

  const enqueue = <T>(task: () => Promise<T> | T): Promise<T> => {
    const run = queue.then(() => {
      if (closed) throw new ConflictError('protocol mapping is stopping');
      return task();
    });
    queue = run.catch(() => undefined);
    return run;
  };
  const runningServices = () => [...entries.values()].flatMap((e) => (e.running ? [e.running] : []));

  const summary = (e: Entry): ServiceSummary => {
    const count = (kind: string) => e.running?.resources.filter((r) => r.kind === kind).length ?? 0;
    const s: ServiceSummary = {
      id: e.id,
      file: e.file.slice(e.file.lastIndexOf('/') + 1),
      state: e.problems.length ? 'refused' : 'applied',
      problems: asIssues(e.problems),
      running: e.running !== undefined,
      resources: { connections: count('connection'), endpoints: count('endpoint'), mappings: count('mapping'), servers: count('server'), nodes: count('nodes'), sparkplug: count('sparkplug'), bridges: count('bridge') },
      modifiedAt: Math.round(e.modifiedAt),
    };
    const description = e.running?.description;
    if (description !== undefined) s.description = description;
    return s;
  };

  const refusedLog = (file: string, problems: FileProblem[], running: boolean, atStart: boolean) =>
    log.error(atStart ? 'service file skipped' : 'service file refused', {
      file,
      path: problems[0]?.path ?? '',
      reason: problems[0]?.reason ?? '',
      problems: problems.map((p) => `${p.path ? `${p.path}: ` : ''}${p.reason}`),
      ...(atStart ? {} : { keptRunning: running }),
    });

  /** Brings the entries in line with a scan of the directory; true when the running set changed. */
  function merge(files: ServiceFile[], atStart: boolean): boolean {
    let changed = false;
    const present = new Set<string>();
    const strayFiles = new Set<string>();
    for (const f of files) {
      const e = entries.get(f.id);
      // The first file of an id owns it (loadServiceDir refuses the others, in name order).
      if (!SERVICE_ID.test(f.id) || present.has(f.id)) {
        strayFiles.add(f.file);
        if (strays.get(f.file) !== f.text) refusedLog(f.file, f.problems, false, atStart);
        strays.set(f.file, f.text);
        continue;
      }
      present.add(f.id);
      // Unchanged: skipped, unless it was refused and now validates (its bridge's runAs user exists).
      if (e && e.file === f.file && e.text === f.text && (e.problems.length === 0 || !f.service)) continue;
      const entry: Entry = e ?? { id: f.id, file: f.file, text: f.text, modifiedAt: f.mtimeMs, running: undefined, problems: [] };
      Object.assign(entry, { file: f.file, text: f.text, modifiedAt: f.mtimeMs });
      if (f.service) {
        entry.running = f.service;
        entry.problems = [];
        changed = true;
      } else {
        entry.problems = f.problems;
        refusedLog(f.file, f.problems, entry.running !== undefined, atStart);
      }
      entries.set(f.id, entry);
    }
    for (const id of [...entries.keys()]) {
      if (present.has(id)) continue;
      log.info('service file removed', { id, file: entries.get(id)!.file });
      if (entries.get(id)!.running) changed = true;
      entries.delete(id);
    }
    for (const file of [...strays.keys()]) if (!strayFiles.has(file)) strays.delete(file);
    return changed;
  }

  /**
   * The entry's parse of a file whose text did not change since (no need to parse it again). A
   * refused file is parsed again: what it names (a bridge's runAs user) may exist by now.
   */
  const known = (file: string, text: string): ServiceFile | undefined => {
    const e = entries.get(basename(file, extname(file)));
    if (!e || e.file !== file || e.text !== text || e.problems.length) return undefined;
    return { id: e.id, file, text, mtimeMs: e.modifiedAt, ...(e.problems.length ? {} : { service: e.running! }), problems: e.problems };
  };

  async function scan(): Promise<void> {
    const { files, missing, error } = loadServiceDir(dir, known, parseOptions);
    if (error) {
      log.error('services directory unreadable', { servicesDir: dir, reason: error });
      return;
    }
    if (merge(files, false)) await deps.apply(runningServices());
    if (missing) watchForDirectory();
  }

  function schedule(): void {
    if (closed) return;
    if (debounce) clearTimeout(debounce);
    debounce = setTimeout(() => {
      debounce = undefined;
      enqueue(scan).catch((err: unknown) => log.error('services directory scan failed', { servicesDir: dir, error: (err as Error).message }));
    }, deps.debounceMs);
    debounce.unref();
  }

  function watchDirectory(): void {
    if (closed || watcher) return;
    try {
      watcher = watch(dir, { persistent: false }, () => schedule());
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return watchForDirectory();
      log.error('services directory not watched', { servicesDir: dir, reason: (err as Error).message });
      return;
    }
    // The directory was removed or replaced: look again (its files are gone, or elsewhere).
    watcher.on('error', () => {
      watcher?.close();
      watcher = undefined;
      schedule();
      watchForDirectory();
    });
  }

  /** While the directory does not exist, look for it now and then; once there, watch it. */
  function watchForDirectory(): void {
    if (closed || !watching || dirPoll) return;
    watcher?.close();
    watcher = undefined;
    dirPoll = setInterval(() => {
      if (!isDirectory(dir)) return;
      clearInterval(dirPoll);
      dirPoll = undefined;
      watchDirectory();
      schedule();
    }, DIRECTORY_POLL_MS);
    dirPoll.unref();
  }

  /** The file a service id is written to: its existing file, else <id>.yaml. */
  const fileOf = (id: string) => entries.get(id)?.file ?? join(dir, `${id}.yaml`);
  const checkId = (id: string) => {
    if (!SERVICE_ID.test(id)) throw new BadRequestError(`service id "${id}" must match ${SERVICE_ID.source} (it is the file name)`);
  };
  const get = (id: string): Entry => {
    checkId(id);
    const e = entries.get(id);
    if (!e) throw new NotFoundError('Service not found');
    return e;
  };
  const parse = (id: string, text: string): ServiceDef => {
    try {
      return parseServiceFile(id, fileOf(id), text, parseOptions);
    } catch (err) {
      if (err instanceof ServiceFileError) throw new BadRequestError(`service ${id} is not valid: ${err.problems.length} problem(s)`, asIssues(err.problems));
      throw err;
    }
  };
  /** The text of the service's file on disk now (undefined: none). */
  const currentText = (id: string): string | undefined => {
    const e = entries.get(id);
    if (!e) return undefined;
    try {
      return readFileSync(e.file, 'utf8');
    } catch {
      return undefined;
    }
  };
  const notWritable = (err: unknown): never => {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EROFS' || code === 'EACCES' || code === 'EPERM') {
      throw new ConflictError(`the services directory ${dir} is not writable (${code}): services are managed by the files there`);
    }
    throw err;
  };

  return {
    load() {
      const { files, missing, error } = loadServiceDir(dir, undefined, parseOptions);
      if (missing) log.info('no service files: the services directory does not exist', { servicesDir: dir });
      if (error) log.error('service file skipped', { file: dir, path: '', reason: error, problems: [error] });
      merge(files, true);
      return runningServices();
    },
    watch() {
      watching = true;
      watchDirectory();
    },
    async close() {
      closed = true;
      watcher?.close();
      watcher = undefined;
      if (dirPoll) clearInterval(dirPoll);
      if (debounce) clearTimeout(debounce);
      await queue;
    },
    list: () => [...entries.values()].sort((a, b) => (a.id < b.id ? -1 : 1)).map(summary),
    read(id) {
      const e = get(id);
      try {
        return { text: redactSecrets(readFileSync(e.file, 'utf8')), summary: summary(e) };
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new NotFoundError('Service not found');
        throw err;
      }
    },
    put(id, sent) {
      checkId(id);
      return enqueue(async () => {
        const text = restoreSecrets(sent, currentText(id));
        const service = parse(id, text);
        const file = fileOf(id);
        const created = !entries.has(id);
        try {
          mkdirSync(dir, { recursive: true, mode: 0o750 });
          // An existing file keeps its mode; a new one is private (it may hold passwords).
          await writeFileAtomicAsync(file, text, modeOf(file) ?? 0o600);
        } catch (err) {
          notWritable(err);
        }
        const entry: Entry = { id, file, text, modifiedAt: statSync(file).mtimeMs, running: service, problems: [] };
        entries.set(id, entry);
        log.info('service file written', { id, file, created });
        const changes = await deps.apply(runningServices());
        log.audit(created ? 'service created' : 'service updated', { serviceId: id, ...changeCounts(changes) });
        if (watching && !watcher) watchDirectory();
        return { created, summary: summary(entry), changes };
      });
    },
    validate(id, sent) {
      checkId(id);
      const text = restoreSecrets(sent, currentText(id));
      try {
        const service = parseServiceFile(id, fileOf(id), text, parseOptions);
        const others = runningServices().filter((s) => s.id !== id);
        return { valid: true, problems: [], changes: deps.plan([...others, service]) };
      } catch (err) {
        if (err instanceof ServiceFileError) return { valid: false, problems: asIssues(err.problems) };
        throw err;
      }
    },
    remove(id) {
      checkId(id);
      return enqueue(async () => {
        const e = get(id);
        try {
          unlinkSync(e.file);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') notWritable(err);
        }
        entries.delete(id);
        log.info('service file deleted', { id, file: e.file });
        const changes = await deps.apply(runningServices());
        log.audit('service deleted', { serviceId: id, ...changeCounts(changes) });
        return changes;
      });
    },
    rescan: () => enqueue(scan),
  };
}

/** What an applied change did, as counts (the audit record of an API write). */
function changeCounts(c: ResourceChanges): Record<string, number> {
  return { added: c.added.length, restarted: c.restarted.length, retargeted: c.retargeted.length, removed: c.removed.length };
}

function modeOf(file: string): number | undefined {
  try {
    return statSync(file).mode & 0o777;
  } catch {
    return undefined;
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

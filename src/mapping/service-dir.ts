// The services directory as files (docs/design.md §11): every *.yaml / *.yml file is one service whose
// id is the file name. Which files count, which id a file gets and which file owns an id; what
// a file holds and whether it is valid is service-files.ts's business.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, extname, join, resolve } from 'node:path';
import type { Logger } from '../log/index.js';
import { parseServiceFile, SERVICE_ID, ServiceFileError, type FileProblem, type ParseOptions, type ServiceDef } from './service-files.js';

const SERVICE_FILE = /\.ya?ml$/i;

const isDirectory = (path: string): boolean => {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
};

/**
 * The services directory: mapping.servicesDir when set, else `<dataDir>/services` — service
 * files are kept with the gateway's data (they can hold device passwords, and the data
 * directory is 0700). Before, the default was `./services` of the working directory: such a
 * directory is still read while `<dataDir>/services` does not exist, with one log line saying
 * where it should move.
 */
export function servicesDirOf(configured: string, dataDir: string, log: Logger, cwd = process.cwd()): string {
  if (configured) return resolve(configured);
  const dir = join(resolve(dataDir), 'services');
  const legacy = resolve(cwd, 'services');
  if (legacy !== dir && !isDirectory(dir) && isDirectory(legacy)) {
    log.warn('service files read from the old default directory: move them to the data directory', { servicesDir: legacy, moveTo: dir });
    return legacy;
  }
  return dir;
}

/** One *.yaml / *.yml file of the services directory, parsed. */
export interface ServiceFile {
  id: string;
  file: string;
  text: string;
  /** Last modification (epoch ms). */
  mtimeMs: number;
  /** Absent when the file does not validate (problems say why). */
  service?: ServiceDef;
  problems: FileProblem[];
}

/**
 * Reads and parses every *.yaml / *.yml file of `dir`, in name order. A missing directory
 * means no services; a file whose id (its name) is not valid or taken is refused. `known`
 * returns an earlier result for the same file and text, which is then not parsed again.
 */
export function loadServiceDir(
  dir: string,
  known?: (file: string, text: string) => ServiceFile | undefined,
  options: ParseOptions = {},
): { files: ServiceFile[]; missing: boolean; error?: string } {
  let names: string[];
  try {
    if (!statSync(dir).isDirectory()) return { files: [], missing: false, error: 'not a directory' };
    names = readdirSync(dir).filter((n) => SERVICE_FILE.test(n)).sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { files: [], missing: true };
    return { files: [], missing: false, error: (err as Error).message };
  }
  const files: ServiceFile[] = [];
  const seen = new Set<string>();
  for (const name of names) {
    const file = join(dir, name);
    const id = basename(name, extname(name));
    let text: string;
    let mtimeMs: number;
    try {
      mtimeMs = statSync(file).mtimeMs;
      text = readFileSync(file, 'utf8');
    } catch (err) {
      // Removed or renamed between the listing and the read (an editor saving): not there.
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      files.push({ id, file, text: '', mtimeMs: 0, problems: [{ path: '', reason: (err as Error).message }] });
      continue;
    }
    const entry: ServiceFile = { id, file, text, mtimeMs, problems: [] };
    if (!SERVICE_ID.test(id)) entry.problems.push({ path: '', reason: `service id "${id}" (the file name) must match ${SERVICE_ID.source}` });
    else if (seen.has(id)) entry.problems.push({ path: '', reason: `service id "${id}" is used by another file` });
    else {
      seen.add(id);
      const before = known?.(file, text);
      if (before) Object.assign(entry, { service: before.service, problems: before.problems });
      else {
        try {
          entry.service = parseServiceFile(id, file, text, options);
        } catch (err) {
          entry.problems = err instanceof ServiceFileError ? err.problems : [{ path: '', reason: (err as Error).message }];
        }
      }
    }
    files.push(entry);
  }
  return { files, missing: false };
}

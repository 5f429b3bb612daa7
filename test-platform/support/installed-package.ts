// The installed Debian package as the platform tests drive it (deb-install, deb-upgrade): dpkg and
// its view of the package, and the daemon started exactly as the installed unit would start it
// (its user, working directory, environment, environment file and umask, read from the unit file).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { startDaemon, type RunningDaemon } from './platform-kit.js';

export const UNIT = '/lib/systemd/system/gatewayd.service';
/** systemd's PATH for services. */
const SYSTEMD_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export function dpkg(...args: string[]): { status: number | null; output: string } {
  const run = spawnSync('dpkg', args, { encoding: 'utf8', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  return { status: run.status, output: run.stdout + run.stderr };
}

export function packageStatus(): string {
  const run = spawnSync('dpkg-query', ['-W', '-f=${Status}', 'gatewayd'], { encoding: 'utf8' });
  return run.status === 0 ? run.stdout : 'unknown';
}

export function installedVersion(): string {
  return execFileSync('dpkg-query', ['-W', '-f=${Version}', 'gatewayd'], { encoding: 'utf8' });
}

/** A run that stopped half way leaves the package: start from none. */
export function purgeIfInstalled(): void {
  if (packageStatus() !== 'unknown' && !packageStatus().includes('not-installed')) dpkg('-P', 'gatewayd');
}

/** systemd's word splitting of a setting, enough for this unit: whitespace, double quotes. */
function words(value: string): string[] {
  return [...value.matchAll(/"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2]!);
}

export interface UnitExecution {
  argv: string[];
  user: string;
  group: string;
  cwd: string;
  env: Record<string, string>;
  umask: string;
}

/** What systemd would run for the unit: command, user, working directory, environment, umask. */
export function unitExecution(unitText: string): UnitExecution {
  const settings = unitText.split('\n').filter((l) => /^[A-Z]\w*=/.test(l));
  const all = (key: string) => settings.filter((l) => l.startsWith(`${key}=`)).map((l) => l.slice(key.length + 1));
  const one = (key: string) => all(key).at(-1) ?? '';
  const env: Record<string, string> = { PATH: SYSTEMD_PATH };
  for (const value of all('Environment')) for (const word of words(value)) env[word.slice(0, word.indexOf('='))] = word.slice(word.indexOf('=') + 1);
  for (const value of all('EnvironmentFile')) {
    const optional = value.startsWith('-');
    const file = optional ? value.slice(1) : value;
    if (!existsSync(file) && optional) continue;
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const m = /^\s*([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
      if (m) env[m[1]!] = m[2]!.replace(/^"(.*)"$/, '$1');
    }
  }
  return { argv: words(one('ExecStart')), user: one('User'), group: one('Group'), cwd: one('WorkingDirectory'), env, umask: one('UMask') };
}

/** The installed unit's ExecStart, run as the unit runs it; resolved at its ready line. */
export function startInstalledUnit(readyTimeoutMs = 60_000): Promise<RunningDaemon> {
  const unit = unitExecution(readFileSync(UNIT, 'utf8'));
  const uid = Number(execFileSync('id', ['-u', unit.user], { encoding: 'utf8' }));
  const gid = Number(execFileSync('id', ['-g', unit.group], { encoding: 'utf8' }));
  return startDaemon({
    command: '/bin/sh',
    args: ['-c', `umask ${unit.umask} && exec "$@"`, 'sh', ...unit.argv],
    env: unit.env,
    cwd: unit.cwd,
    uid,
    gid,
    readyTimeoutMs,
  });
}

export function mode(path: string): string {
  return (statSync(path).mode & 0o7777).toString(8).padStart(4, '0');
}

export function owner(path: string): string {
  const { uid, gid } = statSync(path);
  return execFileSync('stat', ['-c', '%U:%G', path], { encoding: 'utf8' }).trim() || `${uid}:${gid}`;
}

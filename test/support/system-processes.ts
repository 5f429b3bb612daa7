// What the kits of real peers that run as system users share (RabbitMQ as `rabbitmq`,
// PostgreSQL as `postgres`): the user's ids, and the process groups they started, killed when
// the test process exits however it ends (an interrupted run leaves nothing behind).
import { readFileSync } from 'node:fs';

/** uid and gid of a system user (from /etc/passwd); `install`: what provides it. */
export function systemUserIds(name: string, install: string): { uid: number; gid: number } {
  const line = readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith(`${name}:`));
  if (!line) throw new Error(`user ${name} not found (apt-get install ${install})`);
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/** Process groups started by a kit, SIGKILLed at exit. */
export const liveGroups = new Set<number>();
process.once('exit', () => {
  for (const pid of liveGroups) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {}
  }
});

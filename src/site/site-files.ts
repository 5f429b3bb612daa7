// What a site's gateway keeps beside its store, in <data>/site (mode 0700, files 0600): an
// edge's pinned site key and credential from its join; a central's copy of the site's keys, so
// it starts (and serves edges) while PostgreSQL is away. Not in backups: like the MFA key, they
// are secrets of the box.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '../store/write-file-atomic.js';

export interface EdgeJoinState {
  siteId: string;
  publicKeyPem: string;
  fingerprint: string;
  edgeId: string;
  /** `<edge id>.<secret>`: sent in the edge header. */
  credential: string;
  mfaKeyHex: string;
  joinedAt: string;
}

export interface CentralKeys {
  siteId: string;
  signingKeyPem: string;
  mfaKeyHex: string;
}

export function siteFiles(dataDir: string) {
  const dir = join(dataDir, 'site');
  const read = <T>(name: string): T | undefined => {
    const path = join(dir, name);
    if (!existsSync(path)) return undefined;
    return JSON.parse(readFileSync(path, 'utf8')) as T;
  };
  const write = (name: string, value: unknown) => {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    writeFileAtomic(join(dir, name), JSON.stringify(value, null, 2) + '\n', 0o600);
  };
  return {
    edge: () => read<EdgeJoinState>('edge.json'),
    saveEdge: (state: EdgeJoinState) => write('edge.json', state),
    central: () => read<CentralKeys>('central.json'),
    saveCentral: (keys: CentralKeys) => write('central.json', keys),
  };
}

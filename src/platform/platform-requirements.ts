// What gatewayd needs of the machine it starts on (docs/platforms.md), and the verdict on the
// facts of one machine: refuse with one line naming what is missing and the remedy, or start,
// perhaps with a warning. Pure: the facts are read by platform-facts.ts.
//
// This module and platform-facts.ts run before any other part of the daemon is loaded, on any
// Node an operator may have: they use nothing newer than Node 18 has.

/** Below this Node the daemon cannot run (crypto.hash, used throughout, arrived in 20.19). */
export const NODE_FLOOR = '20.19.0';
/** The Node lines CI tests (the LTS lines); others start with a warning. */
export const TESTED_NODE_MAJORS = [22, 24];
/** Lines past their end of life that still start (with a warning), and the date it came. */
export const NODE_END_OF_LIFE: Record<number, string> = { 20: '2026-04-30' };
/**
 * The newest glibc symbol version that the prebuilt native binaries of a production install
 * ask for (`readelf -V`: lmdb's GLIBC_2.34; serialport 2.28, msgpackr-extract 2.3); the
 * platform suite checks every .node file of the amd64, arm64 and armhf installs against it.
 */
export const GLIBC_FLOOR = '2.34';
export const GLIBC_FLOOR_SYSTEMS = 'Debian 12+, Ubuntu 22.04+, Yocto Kirkstone+';
/** Exit code of a refusal: as for an unusable configuration (the unit does not restart on it). */
export const PLATFORM_EXIT_CODE = 78;

/** Where a native module's binary for this machine was found, if anywhere. */
export interface NativeBinary {
  /** 'prebuilt': shipped for this platform and CPU; 'source': built on this machine (no glibc floor). */
  found: 'prebuilt' | 'source' | 'missing';
  /** The platform-CPU pairs this install carries binaries for ('linux-arm64'), for the message. */
  carried: string[];
}

export interface PlatformFacts {
  node: string;
  platform: string;
  arch: string;
  /** The running glibc's version; undefined on another C library (musl) or system. */
  glibc: string | undefined;
  /** The store's native binding: the daemon cannot start without it. */
  lmdb: NativeBinary;
  /** The serial-port binding modbus-serial loads with every Modbus connection (TCP too). */
  serialport: NativeBinary;
}

export interface PlatformVerdict {
  /** One line: what is missing and what to do. The daemon stops when it is set. */
  refusal?: string;
  warnings: string[];
}

/** Compares dotted versions numerically: negative when a < b. */
export function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map((p) => parseInt(p, 10) || 0);
  const pb = b.split('.').map((p) => parseInt(p, 10) || 0);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

const DOCS = 'see docs/platforms.md';
const TESTED = TESTED_NODE_MAJORS.join(' or ');

function nodeVerdict(node: string): { refusal?: string; warning?: string } {
  const major = parseInt(node, 10);
  if (compareVersions(node, NODE_FLOOR) < 0) {
    return { refusal: `Node.js ${node} is too old for gatewayd, which needs Node.js ${TESTED} (at least ${NODE_FLOOR.replace(/\.0$/, '')}): install Node.js 22 LTS, or the gatewayd package that bundles it; ${DOCS}` };
  }
  if (TESTED_NODE_MAJORS.includes(major)) return {};
  const endOfLife = NODE_END_OF_LIFE[major];
  if (endOfLife) return { warning: `Node.js ${major} reached its end of life on ${endOfLife} and gatewayd is not tested on it: move to Node.js ${TESTED}` };
  return { warning: `gatewayd is tested on Node.js ${TESTED}, not on ${node}` };
}

/** The Debian architecture of the gatewayd package for a Node CPU name, if there is one. */
function packageFor(arch: string): string | undefined {
  return ({ x64: 'amd64', arm64: 'arm64', arm: 'armhf' } as Record<string, string>)[arch];
}

/** The refusal for a missing binary: this install was made for another CPU, or there is none for it. */
function missingBinary(facts: PlatformFacts, binary: NativeBinary, what: string): string {
  const here = `${facts.platform}-${facts.arch}`;
  const deb = packageFor(facts.arch);
  if (facts.platform === 'linux' && !deb) return `gatewayd ships no ${what} for ${here}: it runs on amd64, arm64 and armhf; ${DOCS}`;
  const remedy = `run npm ci on this machine${deb ? ` or install the gatewayd package for ${deb}` : ''}`;
  if (binary.carried.length) return `this gatewayd install carries ${what} for ${binary.carried.join(', ')}, not for this ${here} machine: ${remedy}; ${DOCS}`;
  return `this gatewayd install has no ${what} for ${here}: ${remedy}; ${DOCS}`;
}

export function judgePlatform(facts: PlatformFacts): PlatformVerdict {
  const warnings: string[] = [];
  const node = nodeVerdict(facts.node);
  if (node.refusal) return { refusal: node.refusal, warnings };
  if (node.warning) warnings.push(node.warning);

  if (facts.lmdb.found === 'missing') return { refusal: missingBinary(facts, facts.lmdb, 'LMDB binaries (the store)'), warnings };
  // A binding built on this machine is linked against its own glibc: the floor is the prebuilt ones'.
  if (facts.platform === 'linux' && facts.lmdb.found === 'prebuilt') {
    if (facts.glibc === undefined) {
      warnings.push(`this system's C library is not glibc: gatewayd is tested on glibc ${GLIBC_FLOOR} or later only (${GLIBC_FLOOR_SYSTEMS})`);
    } else if (compareVersions(facts.glibc, GLIBC_FLOOR) < 0) {
      return {
        refusal: `this system has glibc ${facts.glibc}, and gatewayd's prebuilt native binaries (LMDB) need glibc ${GLIBC_FLOOR} or later (${GLIBC_FLOOR_SYSTEMS}): upgrade the system or run the gatewayd Docker image; ${DOCS}`,
        warnings,
      };
    }
  }
  if (facts.serialport.found === 'missing') warnings.push(`Modbus connections will not work: ${missingBinary(facts, facts.serialport, 'serial-port binaries (modbus-serial)')}`);
  return { warnings };
}

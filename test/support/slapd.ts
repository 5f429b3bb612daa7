// A private OpenLDAP slapd for the LDAP tests (docs/design.md §8): temp dir, slapd.conf with the mdb
// backend, suffix dc=example,dc=org, core/cosine/inetorgperson/nis schemas, listening on
// ldap://127.0.0.1:<free port>/ in the foreground. Seeded and changed through ldapts as the
// rootdn; stopped with SIGTERM.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Attribute, Change, Client } from 'ldapts';
import { freePort } from './free-port.js';

export const SUFFIX = 'dc=example,dc=org';
export const ROOT_DN = `cn=admin,${SUFFIX}`;
export const ROOT_PASSWORD = 'root-secret';
/** The gateway's service account (read-only). */
export const READER_DN = `cn=reader,${SUFFIX}`;
export const READER_PASSWORD = 'reader-secret';
export const PEOPLE = `ou=people,${SUFFIX}`;
export const GROUPS = `ou=groups,${SUFFIX}`;

const SLAPD = ['/usr/sbin/slapd', '/usr/local/sbin/slapd', '/usr/local/libexec/slapd'].find((p) => existsSync(p)) ?? 'slapd';

export interface Slapd {
  url: string;
  port: number;
  /** With `tls`: ldaps://127.0.0.1:<port> (StartTLS works on `url` too). */
  ldapsUrl?: string;
  /** With `tls`: the PEM file of the CA that signed the server certificate (SAN 127.0.0.1, localhost). */
  caFile?: string;
  /** Runs `fn` with a client bound as the rootdn. */
  admin<T>(fn: (client: Client) => Promise<T>): Promise<T>;
  addUser(uid: string, password: string, extra?: Record<string, string | string[]>): Promise<string>;
  addGroup(cn: string, memberDns: string[]): Promise<string>;
  setMembers(groupDn: string, memberDns: string[]): Promise<void>;
  replace(dn: string, type: string, values: string[]): Promise<void>;
  /** SIGTERM and wait for the exit (idempotent). */
  stop(): Promise<void>;
  /** Starts it again on the same port and data (after stop). */
  restart(): Promise<void>;
  /** stop() and remove the temp dir. */
  destroy(): Promise<void>;
}

/** The gateway's `ldap` configuration for this directory: GROUP mode, the read-only service account. */
export function ldapOverrides(slapd: Slapd, extra: Record<string, unknown> = {}) {
  return {
    ldap: {
      enabled: true,
      mode: 'GROUP',
      url: slapd.url,
      bindDn: READER_DN,
      bindPassword: READER_PASSWORD,
      userSearchBase: PEOPLE,
      userSearchFilter: '(&(objectClass=inetOrgPerson)(uid={{username}}))',
      groupSearchBase: GROUPS,
      groupSearchFilter: '(&(objectClass=groupOfNames)(member={{dn}}))',
      roleAttribute: 'description',
      timeoutMs: 2000,
      ...extra,
    },
  };
}

export const userDn = (uid: string) => `uid=${uid},${PEOPLE}`;
export const groupDn = (cn: string) => `cn=${cn},${GROUPS}`;


const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A CA and a server certificate for 127.0.0.1 / localhost, made with openssl. */
function makeCertificates(dir: string): { ca: string; cert: string; key: string } {
  const f = (name: string) => join(dir, name);
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  writeFileSync(f('server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  ssl('req', '-x509', ...ec, '-keyout', f('ca.key'), '-out', f('ca.pem'), '-days', '2', '-subj', '/CN=gatewayd test LDAP CA');
  ssl('req', ...ec, '-keyout', f('server.key'), '-out', f('server.csr'), '-subj', '/CN=localhost');
  ssl('x509', '-req', '-in', f('server.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-out', f('server.pem'), '-days', '2', '-extfile', f('server.ext'));
  return { ca: f('ca.pem'), cert: f('server.pem'), key: f('server.key') };
}

function config(dir: string, tls?: { ca: string; cert: string; key: string }): string {
  return [
    ...(tls ? [`TLSCACertificateFile ${tls.ca}`, `TLSCertificateFile ${tls.cert}`, `TLSCertificateKeyFile ${tls.key}`] : []),
    'include /etc/ldap/schema/core.schema',
    'include /etc/ldap/schema/cosine.schema',
    'include /etc/ldap/schema/inetorgperson.schema',
    'include /etc/ldap/schema/nis.schema',
    `pidfile ${join(dir, 'slapd.pid')}`,
    `argsfile ${join(dir, 'slapd.args')}`,
    'modulepath /usr/lib/ldap',
    'moduleload back_mdb',
    'loglevel none',
    // Like a permissive directory: a DN with an empty password binds (unauthenticated, RFC 4513
    // §5.1.2). The gateway must refuse empty passwords itself; the tests prove it does.
    'allow bind_anon_dn',
    'database mdb',
    'maxsize 16777216',
    `suffix "${SUFFIX}"`,
    `rootdn "${ROOT_DN}"`,
    `rootpw ${ROOT_PASSWORD}`,
    `directory ${join(dir, 'db')}`,
    'access to attrs=userPassword by self write by anonymous auth by * none',
    `access to * by dn.exact="${READER_DN}" read by self read by * none`,
    '',
  ].join('\n');
}

async function bindsWithin(url: string, ms: number, exited: () => boolean): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline && !exited()) {
    const client = new Client({ url, timeout: 1000, connectTimeout: 1000 });
    try {
      await client.bind(ROOT_DN, ROOT_PASSWORD);
      return true;
    } catch {
      await sleep(100);
    } finally {
      await client.unbind().catch(() => {});
    }
  }
  return false;
}

export async function startSlapd(options: { tls?: boolean } = {}): Promise<Slapd> {
  const dir = mkdtempSync(join(tmpdir(), 'gatewayd-slapd-'));
  mkdirSync(join(dir, 'db'));
  const confPath = join(dir, 'slapd.conf');
  const certs = options.tls ? makeCertificates(dir) : undefined;
  writeFileSync(confPath, config(dir, certs));

  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let port = 0;
  let tlsPort = 0;
  let output = '';

  async function launch(onPorts?: { port: number; tlsPort: number }): Promise<boolean> {
    port = onPorts?.port ?? (await freePort());
    tlsPort = certs ? (onPorts?.tlsPort ?? (await freePort())) : 0;
    const urls = [`ldap://127.0.0.1:${port}/`, ...(certs ? [`ldaps://127.0.0.1:${tlsPort}/`] : [])].join(' ');
    const proc = spawn(SLAPD, ['-f', confPath, '-h', urls, '-d', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let gone = false;
    proc.stdout!.on('data', (d) => (output += d));
    proc.stderr!.on('data', (d) => (output += d));
    exited = new Promise((resolve) => proc.once('exit', () => ((gone = true), resolve())));
    proc.once('error', (err) => ((output += String(err)), (gone = true)));
    child = proc;
    if (await bindsWithin(`ldap://127.0.0.1:${port}`, 10_000, () => gone)) return true;
    await stop();
    return false;
  }

  async function stop(): Promise<void> {
    const proc = child;
    child = undefined;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }

  let started = false;
  for (let attempt = 0; attempt < 3 && !started; attempt++) started = await launch();
  if (!started) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`slapd did not start: ${output}`);
  }
  const url = `ldap://127.0.0.1:${port}`;

  async function admin<T>(fn: (client: Client) => Promise<T>): Promise<T> {
    const client = new Client({ url, timeout: 5000, connectTimeout: 5000 });
    try {
      await client.bind(ROOT_DN, ROOT_PASSWORD);
      return await fn(client);
    } finally {
      await client.unbind().catch(() => {});
    }
  }

  await admin(async (c) => {
    await c.add(SUFFIX, { objectClass: ['dcObject', 'organization'], dc: 'example', o: 'Example' });
    await c.add(READER_DN, { objectClass: ['organizationalRole', 'simpleSecurityObject'], cn: 'reader', userPassword: READER_PASSWORD });
    await c.add(PEOPLE, { objectClass: 'organizationalUnit', ou: 'people' });
    await c.add(GROUPS, { objectClass: 'organizationalUnit', ou: 'groups' });
  });

  const slapd: Slapd = {
    url,
    port,
    ...(certs ? { ldapsUrl: `ldaps://127.0.0.1:${tlsPort}`, caFile: certs.ca } : {}),
    admin,
    async addUser(uid, password, extra = {}) {
      const dn = userDn(uid);
      await admin((c) => c.add(dn, { objectClass: ['inetOrgPerson'], uid, cn: uid, sn: uid, userPassword: password, ...extra }));
      return dn;
    },
    async addGroup(cn, memberDns) {
      const dn = groupDn(cn);
      // groupOfNames needs at least one member: the group itself stands in for "nobody".
      await admin((c) => c.add(dn, { objectClass: 'groupOfNames', cn, member: memberDns.length ? memberDns : [dn] }));
      return dn;
    },
    async setMembers(dn, memberDns) {
      await slapd.replace(dn, 'member', memberDns.length ? memberDns : [dn]);
    },
    async replace(dn, type, values) {
      await admin((c) => c.modify(dn, new Change({ operation: 'replace', modification: new Attribute({ type, values }) })));
    },
    stop,
    async restart() {
      if (!(await launch({ port, tlsPort }))) throw new Error(`slapd did not restart on ${port}: ${output}`);
    },
    async destroy() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return slapd;
}

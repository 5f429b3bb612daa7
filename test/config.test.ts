import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { CONFIG_EXIT_CODE, ConfigError, loadConfig } from '../src/config/index.js';
import { inAddressRanges, parseAddressRanges } from '../src/config/address-ranges.js';
import { STORAGE_DEFAULTS, WEAR_DEFAULTS } from '../src/storage/index.js';
import { mainScript, tempDir } from './support/harness.js';

const run = promisify(execFile);

describe('configuration', () => {
  it('loads the embedded defaults with every documented default value', () => {
    const c = loadConfig({ env: {}, cwd: '/srv/gw' });
    expect(c.dataDir).to.equal('/srv/gw/data');
    expect(c.http.port).to.equal(8080);
    expect(c.mqtt.port).to.equal(1883);
    expect(c.mqtt.tlsPort).to.equal(8883);
    expect(c.http.tlsPort).to.equal(8443);
    expect(c.http.plainAllowedFrom).to.deep.equal(['127.0.0.0/8', '::1/128']);
    expect([c.http.tlsCertFile, c.http.tlsKeyFile]).to.deep.equal(['', '']);
    expect(c.mqtt.websocketPath).to.equal('/mqtt');
    expect(c.auth.tokenLifetimeHours).to.equal(12);
    expect(c.registry.defaultDurationMs).to.equal(30000);
  });

  it('applies GATEWAYD_CONFIG, then the environment shortcuts, then generic keys', () => {
    const dir = tempDir();
    const file = join(dir, 'gw.json');
    writeFileSync(file, JSON.stringify({ http: { port: 9000 }, log: { level: 'warn' }, policy: { username: { min: 5 } } }));
    const c = loadConfig({
      env: {
        GATEWAYD_CONFIG: file,
        GATEWAYD_HTTP_PORT: '0',
        GATEWAYD_DATA_DIR: '/var/lib/gatewayd',
        GATEWAYD_SET__POLICY__PASSWORD__MIN: '12',
        GATEWAYD_SET__MQTT__ALLOW_ANONYMOUS: 'true',
      },
    });
    expect(c.http.port).to.equal(0);
    expect(c.log.level).to.equal('warn');
    expect(c.policy.username.min).to.equal(5);
    expect(c.policy.password.min).to.equal(12);
    expect(c.mqtt.allowAnonymous).to.equal(true);
    expect(c.dataDir).to.equal('/var/lib/gatewayd');
  });

  const bad: [string, Record<string, string>, RegExp][] = [
    ['a port out of range', { GATEWAYD_HTTP_PORT: '70000' }, /http\.port/],
    ['a port that is not a number', { GATEWAYD_MQTT_PORT: 'eighty' }, /mqtt\.port/],
    ['an unknown log level', { GATEWAYD_LOG_LEVEL: 'chatty' }, /log\.level.*error, warn/],
    ['a generic key that names nothing', { GATEWAYD_SET__NOPE__KEY: '1' }, /GATEWAYD_SET__NOPE__KEY/],
    ['a negative policy rule', { GATEWAYD_SET__POLICY__PASSWORD__UPPER: '-1' }, /policy\.password\.upper/],
    ['a token lifetime above the maximum', { GATEWAYD_SET__AUTH__TOKEN_LIFETIME_HOURS: '1000' }, /auth\.tokenLifetimeHours/],
    ['an HTTPS port out of range', { GATEWAYD_HTTPS_PORT: '65536' }, /http\.tlsPort/],
    ['an HTTPS certificate without its key', { GATEWAYD_SET__HTTP__TLS_CERT_FILE: '/etc/gatewayd/gw.crt' }, /http\.tlsKeyFile: .*set together/],
    ['an HTTPS key without its certificate', { GATEWAYD_SET__HTTP__TLS_KEY_FILE: '/etc/gatewayd/gw.key' }, /http\.tlsCertFile: .*set together/],
    ['a plain-HTTP range that is not a CIDR block', { GATEWAYD_SET__HTTP__PLAIN_ALLOWED_FROM: '["10.0.0.0/33"]' }, /http\.plainAllowedFrom: "10\.0\.0\.0\/33" is not an IP address or CIDR block/],
    ['a plain-HTTP range that is a host name', { GATEWAYD_SET__HTTP__PLAIN_ALLOWED_FROM: '["scada.plant.local"]' }, /http\.plainAllowedFrom: "scada\.plant\.local"/],
  ];
  for (const [what, env, key] of bad) {
    it(`refuses ${what}, naming the key`, () => {
      expect(() => loadConfig({ env })).to.throw(ConfigError, key);
    });
  }

  it('takes the HTTPS port, the certificate files (resolved) and the plain-HTTP ranges from the environment', () => {
    const c = loadConfig({
      cwd: '/srv/gw',
      env: {
        GATEWAYD_HTTPS_PORT: '9443',
        GATEWAYD_SET__HTTP__TLS_CERT_FILE: 'pki/gw.crt',
        GATEWAYD_SET__HTTP__TLS_KEY_FILE: '/etc/gatewayd/gw.key',
        GATEWAYD_SET__HTTP__PLAIN_ALLOWED_FROM: '["127.0.0.1", "192.168.10.0/24", "fd00::/8"]',
      },
    });
    expect(c.http.tlsPort).to.equal(9443);
    expect(c.http.tlsCertFile).to.equal('/srv/gw/pki/gw.crt');
    expect(c.http.tlsKeyFile).to.equal('/etc/gatewayd/gw.key');
    expect(c.http.plainAllowedFrom).to.deep.equal(['127.0.0.1', '192.168.10.0/24', 'fd00::/8']);
  });

  it('matches plain-HTTP ranges against addresses as IPv4, IPv6 and dual-stack listeners report them', () => {
    const ranges = parseAddressRanges(['127.0.0.0/8', '::1/128', '192.168.10.0/24']);
    for (const inside of ['127.0.0.1', '127.9.9.9', '::1', '::ffff:127.0.0.1', '192.168.10.77', '::ffff:192.168.10.77']) expect(inAddressRanges(ranges, inside), inside).to.equal(true);
    for (const outside of ['192.168.11.1', '10.0.0.1', '::ffff:10.0.0.1', 'fe80::1', '', undefined]) expect(inAddressRanges(ranges, outside), String(outside)).to.equal(false);
    expect(inAddressRanges(parseAddressRanges([]), '127.0.0.1')).to.equal(false);
  });

  it('refuses an unknown key in the config file', () => {
    const file = join(tempDir(), 'gw.json');
    writeFileSync(file, JSON.stringify({ http: { prot: 1 } }));
    expect(() => loadConfig({ env: { GATEWAYD_CONFIG: file } })).to.throw(ConfigError, /http.*"prot"/);
  });

  it('refuses a config file that is not JSON', () => {
    const file = join(tempDir(), 'gw.json');
    writeFileSync(file, '{ http: ');
    expect(() => loadConfig({ env: { GATEWAYD_CONFIG: file } })).to.throw(ConfigError, /not valid JSON/);
  });

  it('stops the daemon with exit code 78 and one clear message', async () => {
    const err = await run(process.execPath, [mainScript], {
      env: { PATH: process.env.PATH ?? '', GATEWAYD_DATA_DIR: tempDir(), GATEWAYD_HTTP_PORT: '99999' },
    }).then(
      () => null,
      (e: { code: number; stderr: string; stdout: string }) => e,
    );
    expect(err, 'daemon must fail').to.not.equal(null);
    expect(err!.code).to.equal(CONFIG_EXIT_CODE);
    // One line of refusal (an end-of-life warning of the Node running the test may stand before it).
    expect(err!.stderr.trim().split('\n').filter((l) => !l.startsWith('gatewayd: warning:'))).to.have.length(1);
    expect(err!.stderr).to.match(/invalid configuration: http\.port/);
    expect(err!.stdout).to.equal('');
  });

  it('takes the storage policy from the storage section, its defaults those the parts use without configuration, and refuses values out of range naming the key', async () => {
    const c = loadConfig({ env: {} });
    expect(c.storage).to.deep.equal({
      holdMs: 200,
      commitIntervalMs: 500,
      backgroundCommitMs: 30000,
      flash: { capacityBytes: 8e9, ratedWriteCycles: 1000, writeAmplification: 3, lifeYears: 10, burstBytes: 320_000_000, warnBelowYears: 5 },
    });
    const { holdMs, commitIntervalMs, backgroundCommitMs } = c.storage;
    expect({ holdMs, commitIntervalMs, backgroundCommitMs }).to.deep.equal(STORAGE_DEFAULTS);
    const { warnBelowYears: _warn, ...wear } = c.storage.flash;
    expect(wear, 'the wear budget parts use without configuration').to.deep.equal(WEAR_DEFAULTS);
    expect(loadConfig({ env: { GATEWAYD_SET__STORAGE__FLASH__BURST_BYTES: '0', GATEWAYD_SET__STORAGE__FLASH__LIFE_YEARS: '20' } }).storage.flash).to.include({ burstBytes: 0, lifeYears: 20 });
    expect(loadConfig({ env: { GATEWAYD_SET__STORAGE__HOLD_MS: '0', GATEWAYD_SET__STORAGE__FLASH__RATED_WRITE_CYCLES: '20000' } }).storage).to.include({ holdMs: 0 });
    for (const [key, value, named] of [
      ['GATEWAYD_SET__STORAGE__HOLD_MS', '60001', 'storage.holdMs'],
      ['GATEWAYD_SET__STORAGE__COMMIT_INTERVAL_MS', '5', 'storage.commitIntervalMs'],
      ['GATEWAYD_SET__STORAGE__BACKGROUND_COMMIT_MS', '600000', 'storage.backgroundCommitMs'],
      ['GATEWAYD_SET__STORAGE__FLASH__CAPACITY_BYTES', '1000', 'storage.flash.capacityBytes'],
      ['GATEWAYD_SET__STORAGE__FLASH__WRITE_AMPLIFICATION', '0.5', 'storage.flash.writeAmplification'],
      ['GATEWAYD_SET__STORAGE__FLASH__LIFE_YEARS', '0', 'storage.flash.lifeYears'],
      ['GATEWAYD_SET__STORAGE__FLASH__BURST_BYTES', '-1', 'storage.flash.burstBytes'],
      ['GATEWAYD_SET__STORAGE__FLASH__BURST_BYTES', '1.5', 'storage.flash.burstBytes'],
    ] as const) {
      expect(() => loadConfig({ env: { [key]: value } }), key).to.throw(ConfigError, new RegExp(named.replace(/\./g, '\\.')));
    }
    const err = await run(process.execPath, [mainScript], {
      env: { PATH: process.env.PATH ?? '', GATEWAYD_DATA_DIR: tempDir(), GATEWAYD_SET__STORAGE__BACKGROUND_COMMIT_MS: '3600000' },
    }).then(
      () => null,
      (e: { code: number; stderr: string }) => e,
    );
    expect(err?.code).to.equal(CONFIG_EXIT_CODE);
    expect(err!.stderr).to.match(/invalid configuration: storage\.backgroundCommitMs/);
  });

  it('stops with 78 when the admin password breaks the password policy', async () => {
    const err = await run(process.execPath, [mainScript], {
      env: { PATH: process.env.PATH ?? '', GATEWAYD_DATA_DIR: tempDir(), GATEWAYD_HTTP_PORT: '0', GATEWAYD_HTTPS_PORT: '0', GATEWAYD_MQTT_PORT: '0', GATEWAYD_MQTTS_PORT: '0', GATEWAYD_HOST: '127.0.0.1', GATEWAYD_ADMIN_PASSWORD: 'short' },
    }).then(
      () => null,
      (e: { code: number; stderr: string }) => e,
    );
    expect(err!.code).to.equal(CONFIG_EXIT_CODE);
    expect(err!.stderr).to.match(/auth\.adminPassword/);
    expect(err!.stderr).to.not.include('short');
  });
});

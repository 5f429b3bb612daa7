// After a reboot every device connects at once, before any password check has finished: checks
// of the same password against the same stored hash share one scrypt derivation (src/auth/
// password-check.ts, verified-password-cache.ts), while a different or wrong password costs its
// own and the throttle counts every attempt. Real gateway, real broker, mqtt.js clients; the
// derivations are counted with a sinon spy on the gateway's password hasher.
import { expect } from 'chai';
import sinon from 'sinon';
import { rmSync } from 'node:fs';
import { GOOD_PASSWORD, startGateway, tempDir, type TestGateway } from './support/harness.js';
import { connackCode, endAllClients } from './support/mqtt-test-kit.js';

describe('concurrent first password checks', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let verify: sinon.SinonSpy;

  before(async () => {
    gw = await startGateway();
  });
  beforeEach(() => {
    verify = sinon.spy(gw.services.hasher, 'verify');
  });
  afterEach(async () => {
    verify.restore();
    await endAllClients();
  });
  after(async () => {
    await gw?.stop();
  });

  const device = async (username: string, password = GOOD_PASSWORD) => {
    await gw.services.users.create({ username, password, identityProvider: 'local', initialPermissions: [{ resource: `${username}/#`, operation: 'readWrite', context: 'mqtt' }] });
  };
  const connects = (username: string, passwords: string[]) => Promise.all(passwords.map((password) => connackCode(gw.ports.mqtt, { username, password })));

  it('50 identical connects at once: one derivation, all accepted', async () => {
    await device('reboot-a');
    const codes = await connects('reboot-a', Array(50).fill(GOOD_PASSWORD));
    expect(codes.every((c) => c === 0), JSON.stringify(codes)).to.equal(true);
    expect(verify.callCount).to.equal(1);
  });

  it('two devices with their own passwords, 25 connects each at once: one derivation each', async () => {
    await device('reboot-b');
    await device('reboot-c', 'An0ther-Str0ng-Password');
    const [b, c] = await Promise.all([connects('reboot-b', Array(25).fill(GOOD_PASSWORD)), connects('reboot-c', Array(25).fill('An0ther-Str0ng-Password'))]);
    expect([...b, ...c].every((code) => code === 0)).to.equal(true);
    expect(verify.callCount).to.equal(2);
  });

  it('two different passwords for one user at once: two derivations, only the right one accepted', async () => {
    await device('reboot-d');
    const codes = await connects('reboot-d', [GOOD_PASSWORD, 'Wr0ng-Password!']);
    expect(codes[0]).to.equal(0);
    expect(codes[1]).to.equal(4); // bad username or password
    expect(verify.callCount).to.equal(2);
  });

  it('a wrong password shares nothing: each attempt costs its own derivation and counts as a failure', async () => {
    await device('reboot-e');
    const codes = await connects('reboot-e', Array(5).fill('Wr0ng-Password!'));
    expect(codes.every((c) => c === 4), JSON.stringify(codes)).to.equal(true);
    expect(verify.callCount).to.equal(5);
    // Five failures counted: with the gateway's throttle (3 free, 10 at most) the right password
    // still gets in, after its delay, and a correct check resets the count.
    expect(await connackCode(gw.ports.mqtt, { username: 'reboot-e', password: GOOD_PASSWORD })).to.equal(0);
    expect(gw.logs().filter((l) => l.message === 'login failed' && l.username === 'reboot-e')).to.have.length(5);
  });
});

// What docs/footprint.md tells fleets to use instead (issue 36): a session token as password is
// checked by its digest, so a storm of them right after a start costs no derivation at all.
describe('a storm of session-token connects right after a start', function () {
  this.timeout(60_000);
  const dataDir = tempDir();
  let gw: TestGateway | undefined;
  after(async () => {
    await gw?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('50 token connects at once to a gateway just started: no derivation, all accepted; the password beside them: one', async () => {
    const first = await startGateway({ dataDir, keepDataDir: true });
    let token: string;
    try {
      await first.services.users.create({ username: 'fleet-1', password: GOOD_PASSWORD, identityProvider: 'local', initialPermissions: [{ resource: 'fleet-1/#', operation: 'readWrite', context: 'mqtt' }] });
      token = await first.login('fleet-1', GOOD_PASSWORD);
    } finally {
      await first.stop();
    }
    gw = await startGateway({ dataDir, keepDataDir: true });
    const verify = sinon.spy(gw.services.hasher, 'verify');
    try {
      const codes = await Promise.all(Array.from({ length: 50 }, () => connackCode(gw!.ports.mqtt, { username: 'fleet-1', password: token })));
      expect(codes.every((c) => c === 0), JSON.stringify(codes)).to.equal(true);
      expect(verify.callCount, 'derivations for 50 token connects').to.equal(0);
      // The control: the same user's password after the same start costs its derivation.
      expect(await connackCode(gw.ports.mqtt, { username: 'fleet-1', password: GOOD_PASSWORD })).to.equal(0);
      expect(verify.callCount).to.equal(1);
    } finally {
      verify.restore();
      await endAllClients();
    }
  });
});

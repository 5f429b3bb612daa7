// After a reboot every device connects at once, before any password check has finished: checks
// of the same password against the same stored hash share one scrypt derivation (src/auth/
// password-check.ts, verified-password-cache.ts), while a different or wrong password costs its
// own and the throttle counts every attempt. Real gateway, real broker, mqtt.js clients; the
// derivations are counted with a sinon spy on the gateway's password hasher.
import { expect } from 'chai';
import sinon from 'sinon';
import { GOOD_PASSWORD, startGateway, type TestGateway } from './support/harness.js';
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

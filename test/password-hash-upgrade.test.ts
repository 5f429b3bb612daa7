// auth.passwordHashCost applies to existing passwords at their next successful login: a hash of
// another cost is derived again at the configured one after the answer (src/auth/password-check.ts,
// users.rehashPassword). Real gateway on a real LMDB data directory, restarted with another cost;
// real broker and mqtt.js clients, REST logins; the stored hash's parameters read with scrypt-kdf.
import { expect } from 'chai';
import { rmSync } from 'node:fs';
import sinon from 'sinon';
import { GOOD_PASSWORD, startGateway, tempDir, type TestGateway } from './support/harness.js';
import { connackCode, endAllClients } from './support/mqtt-test-kit.js';

/** scrypt-kdf's key: 'scrypt', a version byte, then logN (its format, as Scrypt.viewParams reads it). */
const costOf = (hash: string | undefined) => (hash ? Buffer.from(hash, 'base64')[7] : undefined);

describe('password hashes follow auth.passwordHashCost at the next login', function () {
  this.timeout(60_000);
  const dataDir = tempDir();
  let gw: TestGateway;
  const ids: Record<string, string> = {};
  const hashOf = (username: string) => gw.services.store.users.get(ids[username]!)?.passwordHash;

  before(async () => {
    // Users made at cost 10, then the gateway restarted at 11 on the same data directory.
    const first = await startGateway({ dataDir, keepDataDir: true, overrides: { auth: { passwordHashCost: 10 } } });
    try {
      for (const username of ['upgrade-a', 'upgrade-b', 'upgrade-c', 'upgrade-d', 'upgrade-e']) {
        const user = await first.services.users.create({ username, password: GOOD_PASSWORD, identityProvider: 'local', initialPermissions: [{ resource: `${username}/#`, operation: 'readWrite', context: 'mqtt' }] });
        ids[username] = user.id;
      }
    } finally {
      await first.stop();
    }
    gw = await startGateway({ dataDir, overrides: { auth: { passwordHashCost: 11 } } });
  });
  afterEach(async () => {
    sinon.restore();
    await endAllClients();
  });
  after(async () => {
    await gw?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('an MQTT login with the right password stores it again at the configured cost, and the next connect needs no derivation', async () => {
    expect(costOf(hashOf('upgrade-a'))).to.equal(10);
    const upgraded = gw.waitForLog((l) => l.message === 'password hash upgraded to the configured cost' && l.username === 'upgrade-a');
    expect(await connackCode(gw.ports.mqtt, { username: 'upgrade-a', password: GOOD_PASSWORD })).to.equal(0);
    const line = await upgraded;
    expect(JSON.stringify(line)).not.to.contain(GOOD_PASSWORD);
    expect(costOf(hashOf('upgrade-a'))).to.equal(11);
    const verify = sinon.spy(gw.services.hasher, 'verify');
    expect(await connackCode(gw.ports.mqtt, { username: 'upgrade-a', password: GOOD_PASSWORD })).to.equal(0);
    expect(verify.callCount, 'answered from the verified-password cache').to.equal(0);
    // The upgraded hash verifies the password, and only it.
    expect(await gw.services.hasher.verify(hashOf('upgrade-a'), GOOD_PASSWORD)).to.equal(true);
    expect(await gw.services.hasher.verify(hashOf('upgrade-a'), 'Wr0ng-Password!')).to.equal(false);
  });

  it('a REST login does the same, and leaves the rest of the user as it was', async () => {
    const before = gw.services.store.users.get(ids['upgrade-b']!)!;
    const upgraded = gw.waitForLog((l) => l.message === 'password hash upgraded to the configured cost' && l.username === 'upgrade-b');
    await gw.login('upgrade-b', GOOD_PASSWORD);
    await upgraded;
    const after = gw.services.store.users.get(ids['upgrade-b']!)!;
    expect(costOf(after.passwordHash)).to.equal(11);
    expect({ ...after, passwordHash: undefined }).to.deep.equal({ ...before, passwordHash: undefined });
  });

  it('a wrong password derives nothing more and changes nothing', async () => {
    const hash = sinon.spy(gw.services.hasher, 'hash');
    const stored = hashOf('upgrade-c');
    expect(await connackCode(gw.ports.mqtt, { username: 'upgrade-c', password: 'Wr0ng-Password!' })).to.equal(4);
    expect(hash.callCount).to.equal(0);
    expect(hashOf('upgrade-c')).to.equal(stored);
  });

  it('a password changed while the upgrade was under way is kept, not overwritten', async () => {
    const stored = hashOf('upgrade-d')!;
    await gw.services.users.changePassword(ids['upgrade-d']!, GOOD_PASSWORD, 'N3w-Str0ng-Password');
    expect(await gw.services.users.rehashPassword(ids['upgrade-d']!, stored, GOOD_PASSWORD)).to.equal(undefined);
    expect(await gw.services.hasher.verify(hashOf('upgrade-d'), 'N3w-Str0ng-Password')).to.equal(true);
  });

  it("a site's record is left to the site", async () => {
    sinon.stub(gw.services.identity, 'isSiteRecord').returns(true);
    const hash = sinon.spy(gw.services.hasher, 'hash');
    expect(await gw.services.users.rehashPassword(ids['upgrade-e']!, hashOf('upgrade-e')!, GOOD_PASSWORD)).to.equal(undefined);
    expect(hash.callCount).to.equal(0);
    expect(costOf(hashOf('upgrade-e'))).to.equal(10);
  });

  it('a hash already at the configured cost is not derived again', async () => {
    const again = await startGateway({ overrides: { auth: { passwordHashCost: 10 } } });
    try {
      await again.services.users.create({ username: 'same-cost', password: GOOD_PASSWORD, identityProvider: 'local', initialPermissions: [{ resource: 'same-cost/#', operation: 'readWrite', context: 'mqtt' }] });
      const hash = sinon.spy(again.services.hasher, 'hash');
      expect(await connackCode(again.ports.mqtt, { username: 'same-cost', password: GOOD_PASSWORD })).to.equal(0);
      expect(hash.callCount).to.equal(0);
    } finally {
      await again.stop();
    }
  });
});

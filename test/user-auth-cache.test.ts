// The decoded-user cache of password checks (users.findByUsernameForAuth): it answers from
// memory only while the store saw no transaction, so every change of a user (password, grant
// types, deletion) and a restore reach the next password check. Real gateway, real LMDB.
import { expect } from 'chai';
import { ForbiddenError } from '../src/errors/errors.js';
import { GOOD_PASSWORD, startGateway, type TestGateway } from './support/harness.js';
import { connackCode, connect, endAllClients } from './support/mqtt-test-kit.js';

describe('user record cache of password checks', function () {
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway();
  });
  after(async () => {
    await gw?.stop();
  });

  it('returns the same frozen record while nothing is written, and a fresh one after any transaction', async () => {
    const { users, store } = gw.services;
    const created = await users.create({ username: 'cache-a', password: GOOD_PASSWORD, identityProvider: 'local' });
    const first = users.findByUsernameForAuth('cache-a');
    expect(first?.id).to.equal(created.id);
    expect(users.findByUsernameForAuth('cache-a')).to.equal(first); // no LMDB read
    expect(Object.isFrozen(first)).to.equal(true);
    expect(Object.isFrozen(first!.grantTypes)).to.equal(true);
    const generation = store.writeGeneration();
    // Any transaction, even one that does not touch this user, makes the next read fresh.
    await store.transaction(() => store.meta.put('cache-test', 1));
    expect(store.writeGeneration()).to.not.equal(generation);
    const second = users.findByUsernameForAuth('cache-a');
    expect(second).to.not.equal(first);
    expect(second).to.deep.equal(first);
    expect(users.findByUsernameForAuth('no-such-user')).to.equal(undefined);
  });

  it('a password change and a deletion reach the next password check at once', async () => {
    const { users, auth } = gw.services;
    const user = await users.create({ username: 'cache-b', password: GOOD_PASSWORD, identityProvider: 'local' });
    // Verified once (scrypt), then answered by the verified-password cache and the user cache.
    expect((await auth.authenticateSecret('cache-b', GOOD_PASSWORD, 'mqtt')).user.id).to.equal(user.id);
    expect((await auth.authenticateSecret('cache-b', GOOD_PASSWORD, 'mqtt')).user.id).to.equal(user.id);
    await users.changePassword(user.id, GOOD_PASSWORD, 'An0ther-Password');
    let refused: unknown;
    await auth.authenticateSecret('cache-b', GOOD_PASSWORD, 'mqtt').catch((err: unknown) => (refused = err));
    expect(refused, 'the old password still worked').to.be.instanceOf(Error);
    expect((await auth.authenticateSecret('cache-b', 'An0ther-Password', 'mqtt')).user.id).to.equal(user.id);
    await users.delete(user.id);
    expect(users.findByUsernameForAuth('cache-b')).to.equal(undefined);
    refused = undefined;
    await auth.authenticateSecret('cache-b', 'An0ther-Password', 'mqtt').catch((err: unknown) => (refused = err));
    expect(refused, 'a deleted user still logged in').to.be.instanceOf(Error);
  });

  it('a reopen of the store (restore) makes the next read fresh', async () => {
    const { users, store } = gw.services;
    await users.create({ username: 'cache-c', password: GOOD_PASSWORD, identityProvider: 'local' });
    const before = users.findByUsernameForAuth('cache-c');
    expect(before).to.not.equal(undefined);
    await store.reopen(async () => {});
    const after = users.findByUsernameForAuth('cache-c');
    expect(after).to.not.equal(before);
    expect(after?.id).to.equal(before?.id);
  });
});

// A password verified moments ago (a device reconnecting after a blip) is answered without
// waiting: no scrypt, no async hops, no slot of the broker's authentication limiter. Everything
// else (a first check, a wrong password, a throttled or locked username) takes the full way.
describe('password checks answered at once', function () {
  let gw: TestGateway;
  const DELAY_MS = 3000;
  before(async () => {
    gw = await startGateway({
      overrides: {
        mqtt: { maxConcurrentAuth: 1 },
        auth: { loginThrottle: { freeAttempts: 1, maxAttempts: 5, delayStepMs: DELAY_MS, maxDelayMs: DELAY_MS, lockoutSeconds: 60, maxTrackedUsernames: 100, maxFailuresPerAddress: 0 } },
      },
    });
  });
  after(async () => {
    await endAllClients();
    await gw?.stop();
  });

  it('only for a password verified before, counted as a success, with the same refusals', async () => {
    const { users, auth } = gw.services;
    const user = await users.create({ username: 'once-a', password: GOOD_PASSWORD, identityProvider: 'local' });
    expect(auth.authenticateSecretAtOnce('once-a', GOOD_PASSWORD), 'never verified: scrypt first').to.equal(undefined);
    await auth.authenticateSecret('once-a', GOOD_PASSWORD, 'mqtt');
    const counts = auth.loginCounts();
    expect(auth.authenticateSecretAtOnce('once-a', GOOD_PASSWORD)?.user.id).to.equal(user.id);
    expect(auth.authenticateSecretAtOnce('once-a', 'Wr0ng-Password'), 'a wrong password goes the full way').to.equal(undefined);
    expect(auth.loginCounts()).to.deep.equal({ succeeded: counts.succeeded + 1, failed: counts.failed });
    // A session token needs no waiting either.
    const token = await gw.login('once-a', GOOD_PASSWORD);
    expect(auth.authenticateSecretAtOnce('once-a', token)).to.deep.include({ method: 'token' });
    // Failures earned a delay: the cached password waits for it like any other check.
    for (let i = 0; i < 2; i++) await auth.authenticateSecret('once-a', 'Wr0ng-Password', 'mqtt').catch(() => undefined);
    expect(auth.authenticateSecretAtOnce('once-a', GOOD_PASSWORD), 'a throttled username').to.equal(undefined);
    // MFA rules hold on the quick path too.
    const mfaUser = await users.create({ username: 'once-b', password: GOOD_PASSWORD, identityProvider: 'local' });
    await auth.authenticateSecret('once-b', GOOD_PASSWORD, 'mqtt');
    await users.update(mfaUser.id, { enforceMFAEnrollment: true });
    expect(() => auth.authenticateSecretAtOnce('once-b', GOOD_PASSWORD)).to.throw(ForbiddenError);
  });

  it('lets a reconnecting device in while a slow check holds the only authentication slot', async function () {
    const device = await gw.userWith([{ resource: 'devices/#', operation: 'readWrite', context: 'mqtt' }], 'once-device');
    const slow = await gw.userWith([{ resource: 'devices/#', operation: 'readWrite', context: 'mqtt' }], 'once-slow');
    const port = gw.ports.mqtt;
    // The device's password verified once (scrypt); its reconnects are then answered at once.
    await (await connect(port, { username: device.username, password: GOOD_PASSWORD })).endAsync();
    // Two failures of the slow user (one beyond freeAttempts): its next check waits DELAY_MS inside the only slot.
    for (let i = 0; i < 2; i++) expect(await connackCode(port, { username: slow.username, password: 'Wr0ng-Password', connectTimeout: 10_000 })).to.equal(4);
    const started = Date.now();
    let slowAnswered = 0;
    const slowConnect = connackCode(port, { username: slow.username, password: GOOD_PASSWORD, connectTimeout: 10_000 }).then((code) => ((slowAnswered = Date.now()), code));
    // The slow check holds the slot (bounded wait).
    for (let i = 0; i < 100 && gw.services.broker!.stats().authRunning === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(gw.services.broker!.stats().authRunning).to.equal(1);
    const reconnected = await connect(port, { username: device.username, password: GOOD_PASSWORD });
    const deviceIn = Date.now();
    expect(reconnected.connected).to.equal(true);
    expect(slowAnswered, 'the device waited for the slow check').to.equal(0);
    expect(deviceIn - started).to.be.below(DELAY_MS);
    await reconnected.endAsync();
    expect(await slowConnect).to.equal(0);
    expect(slowAnswered - started).to.be.at.least(DELAY_MS - 100);
  });
});

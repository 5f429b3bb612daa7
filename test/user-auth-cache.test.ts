// The decoded-user cache of password checks (users.findByUsernameForAuth): it answers from
// memory only while the store saw no transaction, so every change of a user (password, grant
// types, deletion) and a restore reach the next password check. Real gateway, real LMDB.
import { expect } from 'chai';
import { GOOD_PASSWORD, startGateway, type TestGateway } from './support/harness.js';

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

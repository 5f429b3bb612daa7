import { rmSync } from 'node:fs';
import { expect } from 'chai';
import { DATA_FORMAT_VERSION, DataFormatError, FORMAT_KEY, FORMAT_WRITTEN_BY_KEY, openStore, prefixRange, type Store } from '../src/store/index.js';
import { tempDir } from './support/harness.js';

describe('store', () => {
  let dir: string;
  let store: Store;
  beforeEach(() => {
    dir = tempDir();
    store = openStore({ dir });
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('rolls back every write of a transaction that throws', async () => {
    await store.roleNames.put('kept', 'r0');
    const failed = await store
      .transaction(() => {
        store.roleNames.put('a', 'r1');
        store.meta.put('half', true);
        store.roleNames.remove('kept');
        throw new Error('validation failed after writing');
      })
      .then(
        () => null,
        (e: Error) => e,
      );
    expect(failed?.message).to.equal('validation failed after writing');
    expect(store.roleNames.get('a')).to.equal(undefined);
    expect(store.meta.get('half')).to.equal(undefined);
    expect(store.roleNames.get('kept')).to.equal('r0');
  });

  it('does not let a failing transaction undo writes queued beside it', async () => {
    const ok = store.roleNames.put('first', '1');
    const bad = store.transaction(() => {
      store.roleNames.put('second', '2');
      throw new Error('no');
    }).catch(() => 'refused');
    const after = store.transaction(() => store.roleNames.put('third', '3'));
    await Promise.all([ok, bad, after]);
    expect([...store.roleNames.getKeys()]).to.deep.equal(['first', 'third']);
  });

  it('reads composite-key ranges by prefix only', async () => {
    await store.transaction(() => {
      store.roleMembers.put(['role-a', 'u1'], 1);
      store.roleMembers.put(['role-a', 'u2'], 1);
      store.roleMembers.put(['role-ab', 'u3'], 1);
      store.roleMembers.put(['role-b', 'u1'], 1);
    });
    expect([...store.roleMembers.getKeys(prefixRange('role-a'))]).to.deep.equal([
      ['role-a', 'u1'],
      ['role-a', 'u2'],
    ]);
  });

  it('pages a name index in order without reading the records before the page', async () => {
    await store.transaction(() => {
      for (let i = 0; i < 500; i++) store.usernames.put(`user-${String(i).padStart(4, '0')}`, `id-${i}`);
    });
    const page = [...store.usernames.getRange({ offset: 250, limit: 3 })].map((e) => e.key);
    expect(page).to.deep.equal(['user-0250', 'user-0251', 'user-0252']);
  });

  it('reopens in place after a swap and sees the new files', async () => {
    await store.meta.put('marker', 'before');
    const other = tempDir();
    const copy = openStore({ dir: other });
    await copy.meta.put('marker', 'after');
    await copy.close();
    let reopened = 0;
    store.onReopen(() => reopened++);
    const { renameSync } = await import('node:fs');
    await store.reopen(async (d) => {
      rmSync(d, { recursive: true });
      renameSync(other, d);
    });
    expect(store.meta.get('marker')).to.equal('after');
    expect(reopened).to.equal(1);
  });

  it('refuses to open a store of a newer data format; an older one only for its migration', async () => {
    await store.meta.put(FORMAT_KEY, 999);
    await store.close();
    expect(() => openStore({ dir })).to.throw(DataFormatError, `the store holds data format 999; this build reads format ${DATA_FORMAT_VERSION}`);
    expect(() => openStore({ dir, acceptOlderFormat: true })).to.throw(DataFormatError, /data format 999/);
    store = openStore({ dir: tempDir() });
    await store.close();
    const older = tempDir();
    store = openStore({ dir: older });
    await store.meta.put(FORMAT_KEY, DATA_FORMAT_VERSION - 1);
    await store.close();
    expect(() => openStore({ dir: older })).to.throw(DataFormatError, /start gatewayd to migrate it/);
    store = openStore({ dir: older, acceptOlderFormat: true });
    expect(store.openedFormat()).to.equal(DATA_FORMAT_VERSION - 1);
  });

  it('a new store holds this build\'s data format and the version that made it', async () => {
    await store.close();
    store = openStore({ dir: tempDir(), writtenBy: '7.8.9' });
    expect(store.meta.get(FORMAT_KEY)).to.equal(DATA_FORMAT_VERSION);
    expect(store.meta.get(FORMAT_WRITTEN_BY_KEY)).to.equal('7.8.9');
    expect(store.openedFormat()).to.equal(DATA_FORMAT_VERSION);
  });
});

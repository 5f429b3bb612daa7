// GET /api/maintenance/db stays readable while a restore swaps the store: it waits for the swap
// to end and answers the outcome (a page polling it shows progress, not an error), while the
// rest of the API answers 423 during the swap, as before.
import { expect } from 'chai';
import sinon from 'sinon';
import { startGateway, type TestGateway } from './support/harness.js';

async function idleStatus(gw: TestGateway, token: string): Promise<Record<string, any>> {
  for (let i = 0; i < 1500; i++) {
    const res = await gw.api('GET', '/api/maintenance/db', { token });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    if (!res.body.running) return res.body;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error('maintenance did not become idle within 30 s');
}

describe('maintenance: the status during a restore swap', () => {
  let gw: TestGateway;
  /** Lets a held swap go on (also when an assertion failed while it was held). */
  let release: () => void = () => {};
  afterEach(async () => {
    release();
    sinon.restore();
    await gw?.stop();
  });

  it('answers GET /api/maintenance/db after the swap (not 423) while other calls answer 423', async () => {
    gw = await startGateway();
    const token = await gw.login();
    expect((await gw.api('POST', '/api/maintenance/db/backup', { token })).status).to.equal(202);
    expect((await idleStatus(gw, token)).backup.succeeded).to.equal(true);
    const download = await fetch(`${gw.baseUrl}/api/maintenance/db/backup`, { headers: { authorization: `Bearer ${token}` } });
    const archive = new Uint8Array(await download.arrayBuffer());

    // Hold the swap open until the test has asked during it.
    const store = gw.services.store;
    const original = store.reopen.bind(store);
    let reached!: () => void;
    const inSwap = new Promise<void>((resolve) => (reached = resolve));
    const released = new Promise<void>((resolve) => (release = resolve));
    sinon.stub(store, 'reopen').callsFake(async (swap) => {
      reached();
      await released;
      return original(swap);
    });

    const form = new FormData();
    form.append('file', new Blob([archive], { type: 'application/gzip' }), 'backup.tar.gz');
    expect((await gw.api('POST', '/api/maintenance/db/restore', { token, raw: form })).status).to.equal(202);
    await inSwap;

    let answered = false;
    const status = gw.api('GET', '/api/maintenance/db', { token }).finally(() => (answered = true));
    const other = await gw.api('GET', '/api/roles', { token });
    expect(other.status).to.equal(423);
    expect(other.headers.get('retry-after')).to.equal('2');
    expect(answered, 'the status answered while the store was still being swapped').to.equal(false);

    release();
    const res = await status;
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.running).to.equal(false);
    expect(res.body.restore.succeeded, res.body.restore.statusMessage).to.equal(true);
    expect((await gw.api('GET', '/api/roles', { token })).status).to.equal(200);
  });
});

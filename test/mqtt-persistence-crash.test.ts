// kill -9 of a broker process right after its publisher got a PUBACK: a bare aedes 2 broker on
// the LMDB persistence (durable acknowledgements on), killed and started again on the same store.
import { rmSync } from 'node:fs';
import { expectAckedStateToSurviveKill, startBareBrokerProcess } from './support/broker-crash-kit.js';
import { tempDir } from './support/harness.js';
import { endAllClients } from './support/mqtt-test-kit.js';

describe('mqtt persistence: kill -9 right after a PUBACK', function () {
  this.timeout(60_000);
  const dirs: string[] = [];
  afterEach(endAllClients);
  after(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

  it('a restarted broker delivers the acknowledged retained message and the message queued for an offline persistent session', async () => {
    const dir = tempDir('gatewayd-crash-');
    dirs.push(dir);
    await expectAckedStateToSurviveKill({ start: () => startBareBrokerProcess(dir) });
  });

  it('the same with MQTT 5 clients (session expiry interval set)', async () => {
    const dir = tempDir('gatewayd-crash5-');
    dirs.push(dir);
    await expectAckedStateToSurviveKill({ start: () => startBareBrokerProcess(dir), clientOptions: () => ({ protocolVersion: 5, properties: { sessionExpiryInterval: 3600 } }) });
  });
});

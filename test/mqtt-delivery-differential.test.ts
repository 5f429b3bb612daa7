// Delivery is exact, whatever the timing (issue 35 A): for every combination of protocol version,
// clean or persistent session, subscription QoS, message QoS, delay between SUBSCRIBE and PUBLISH,
// and a subscriber that acknowledges, one that pauses, a publisher that is its own subscriber and
// a will, the gatewayd broker (on a real LMDB store, the storage policy's default timings)
// delivers live exactly what Mosquitto 2 (Debian's, run beside it) delivers, in the same order,
// and after a reconnect exactly what is still owed. Before the fix a persistent subscriber missed
// what was published before its subscription's group commit (up to 500 ms after the SUBSCRIBE).
import { rmSync } from 'node:fs';
import { expect } from 'chai';
import { openStore, type Store } from '../src/store/index.js';
import { allScenarios, runScenario, type Credentials, type Scenario, type Transcript } from './support/delivery-scenarios.js';
import { tempDir } from './support/harness.js';
import { makeCerts, startBroker, type Certs, type TestBroker } from './support/mqtt-test-kit.js';
import { startMosquitto, type Mosquitto } from './support/mosquitto.js';
import { StaticMqttAccess } from './support/static-mqtt-access.js';

const DELAYS = [0, 10, 100, 300, 600, 1500] as const;
/** Scenarios running at once against each broker. */
const CONCURRENCY = 64;

async function runAll(port: number, scenarios: Scenario[], prefix: string, credentials: Credentials): Promise<Map<string, Transcript | Error>> {
  const results = new Map<string, Transcript | Error>();
  let next = 0;
  const worker = async () => {
    while (next < scenarios.length) {
      const s = scenarios[next++]!;
      results.set(s.id, await runScenario(port, s, prefix, credentials).catch((err: Error) => err));
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return results;
}

function describeTranscript(t: Transcript | Error | undefined): string {
  if (t === undefined) return 'none';
  if (t instanceof Error) return `error: ${t.message}`;
  const d = (list: Transcript['live']) => list.map((m) => `${m.topic}${m.payload ? `=${m.payload}` : ''}:q${m.qos}${m.dup ? ':dup' : ''}${m.retain ? ':retained' : ''}`).join(' ') || '-';
  return `live [${d(t.live)}] sessionPresent ${t.sessionPresent ? 1 : 0} after [${d(t.after)}]`;
}

describe('delivery beside Mosquitto 2: the same messages, in the same order, whatever the timing', function () {
  this.timeout(300_000);
  let certs: Certs;
  let dir: string;
  let store: Store;
  let gatewayd: TestBroker;
  let mosquitto: Mosquitto;

  before(async () => {
    certs = await makeCerts();
    dir = tempDir('gatewayd-differential-');
    store = openStore({ dir });
    const access = new StaticMqttAccess([{ username: 'device', password: 'device-pw', permissions: [{ resource: '#', operation: 'readWrite' }] }]);
    gatewayd = await startBroker(access, certs, {}, { store });
    mosquitto = await startMosquitto();
  });
  after(async () => {
    await gatewayd?.stop();
    await store?.close();
    await mosquitto?.close();
    await certs?.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  it(`agrees on all ${allScenarios(DELAYS).length} scenarios (MQTT 3.1.1 and 5, clean and persistent, QoS 0-2 each side, delays ${DELAYS.join('/')} ms, acking, pausing, self-publishing, wills, a retained value and its update)`, async () => {
    const scenarios = allScenarios(DELAYS);
    const credentials = { username: 'device', password: Buffer.from('device-pw') };
    const [ours, theirs] = await Promise.all([runAll(gatewayd.port, scenarios, 'g', credentials), runAll(mosquitto.port, scenarios, 'm', credentials)]);
    const differences: string[] = [];
    for (const s of scenarios) {
      const a = ours.get(s.id);
      const b = theirs.get(s.id);
      const same = !(a instanceof Error) && !(b instanceof Error) && a !== undefined && b !== undefined && JSON.stringify(a) === JSON.stringify(b);
      if (!same) differences.push(`${s.id}\n    gatewayd:  ${describeTranscript(a)}\n    mosquitto: ${describeTranscript(b)}`);
    }
    expect(differences, `${differences.length} of ${scenarios.length} scenarios differ:\n  ${differences.slice(0, 40).join('\n  ')}`).to.deep.equal([]);
    // The comparison is not vacuous: live deliveries happened, and persistent sessions were resumed with what they were owed.
    const transcripts = [...theirs.values()].filter((t): t is Transcript => !(t instanceof Error));
    expect(transcripts.filter((t) => t.live.length > 0).length).to.be.greaterThan(scenarios.length / 2);
    expect(transcripts.filter((t) => t.after.some((m) => m.dup)).length).to.be.greaterThan(0);
  });
});

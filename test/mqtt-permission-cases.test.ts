// The shared MQTT permission cases (test/support/mqtt-permission-cases.ts) on the embedded
// broker, with mqtt.js and with mosquitto_pub/mosquitto_sub. The RabbitMQ cluster test runs the
// same table through gatewayd's hooks: where the two could disagree, one of them fails.
import { startGateway, type TestGateway } from './support/harness.js';
import { endAllClients } from './support/mqtt-test-kit.js';
import { casesFor, runPermissionCase, startObserver, type ClientTool } from './support/mqtt-permission-cases.js';

describe('MQTT permission cases: embedded broker', function () {
  this.timeout(30_000);
  let gw: TestGateway;
  let admin: string;
  let observer: Awaited<ReturnType<typeof startObserver>>;
  before(async () => {
    gw = await startGateway();
    admin = await gw.login();
    observer = await startObserver(gw.ports.mqtt, admin);
  });
  after(async () => {
    await observer?.client.endAsync(true);
    await gw?.stop();
  });
  afterEach(() => endAllClients());

  for (const tool of ['mqtt.js', 'mosquitto'] as ClientTool[]) {
    describe(tool, () => {
      for (const c of casesFor(true)) {
        it(`${c.name}: ${c.expect}`, () => runPermissionCase({ gw, admin, broker: { rewritesTopics: true, port: gw.ports.mqtt, observerPort: gw.ports.mqtt }, observer, tool, c }));
      }
    });
  }
});

// kill -9 checks of the broker state: a broker process is killed with SIGKILL the moment its
// publisher receives a PUBACK, started again on the same data, and must deliver what it had
// acknowledged. `expectAckedStateToSurviveKill` runs the scenario against any broker process:
// the bare aedes 2 broker of test/mqtt-persistence-crash.test.ts, or the gatewayd daemon
// (startDaemonProcess + credentials in clientOptions).
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { IClientOptions, MqttClient } from 'mqtt';
import { connect, connectWithInbox, subscribe, withTimeout } from './mqtt-test-kit.js';

export interface KillableBroker {
  /** MQTT port on 127.0.0.1. */
  port: number;
  /** SIGKILL, at once (synchronously). */
  kill(): void;
  /** Resolves when the process has exited. */
  exited: Promise<unknown>;
  /** Graceful stop (SIGTERM) and wait for the exit. */
  stop(): Promise<void>;
}

/** Wraps a child process that is already up. */
export function killable(child: ChildProcess, port: number, exited: Promise<unknown>): KillableBroker {
  return {
    port,
    exited,
    kill: () => void child.kill('SIGKILL'),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

const bareBrokerScript = fileURLToPath(new URL('./bare-broker-process.js', import.meta.url));

/** test/support/bare-broker-process.ts on the store in `dir`. */
export async function startBareBrokerProcess(dir: string): Promise<KillableBroker> {
  const child = spawn(process.execPath, [bareBrokerScript, dir], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const port = await withTimeout(
    new Promise<number>((resolve, reject) => {
      createInterface({ input: child.stdout! }).on('line', (line) => {
        if (line.startsWith('{"ready"')) resolve((JSON.parse(line) as { port: number }).port);
      });
      void exited.then((code) => reject(new Error(`broker process exited (${String(code)}) before ready: ${stderr}`)));
    }),
    20_000,
    'broker process not ready',
  );
  return killable(child, port, exited);
}

export interface CrashScenarioOptions {
  /** Starts the broker process on the same data every time. */
  start(): Promise<KillableBroker>;
  /** Extra options per client id (credentials, protocolVersion). */
  clientOptions?(clientId: string): IClientOptions;
  /** Topics used: <root>/state/..., <root>/queue/... */
  topicRoot?: string;
}

/** Publishes QoS 1 and kills the broker inside the PUBACK callback; resolves once it exited. */
function publishAndKillOnPuback(client: MqttClient, broker: KillableBroker, topic: string, payload: string, retain: boolean): Promise<unknown> {
  return new Promise((resolve, reject) => {
    client.publish(topic, payload, { qos: 1, retain }, (error) => {
      if (error) return reject(error);
      broker.kill();
      resolve(broker.exited);
    });
  });
}

/** Subscribes at QoS 1 and kills the broker inside the SUBACK callback; resolves with the granted QoS once it exited. */
function subscribeAndKillOnSuback(client: MqttClient, broker: KillableBroker, filter: string): Promise<number[]> {
  return new Promise((resolve, reject) => {
    client.subscribe(filter, { qos: 1 }, (error, granted) => {
      if (error) return reject(error);
      broker.kill();
      void broker.exited.then(() => resolve((granted ?? []).map((g) => g.qos)));
    });
  });
}

/**
 * 1. A persistent session subscribes <root>/queue/# (QoS 1); SIGKILL the moment its SUBACK
 *    arrives (a SUBACK means the subscription survives).
 * 2. A retained QoS 1 message is published; SIGKILL the moment its PUBACK arrives.
 * 3. After a restart a new subscriber gets it; a QoS 1 message for the offline session is
 *    published; SIGKILL the moment its PUBACK arrives.
 * 4. After a restart the session comes back (sessionPresent) and receives the queued message,
 *    and the retained message is still there.
 */
export async function expectAckedStateToSurviveKill(o: CrashScenarioOptions): Promise<void> {
  const root = o.topicRoot ?? 'crash';
  const options = (clientId: string, extra: IClientOptions = {}): IClientOptions => ({ clientId, ...o.clientOptions?.(clientId), ...extra });
  const session = options('crash-session', { clean: false });
  let broker = await o.start();
  try {
    const subscriber = await connect(broker.port, session);
    expect(await subscribeAndKillOnSuback(subscriber, broker, `${root}/queue/#`)).to.deep.equal([1]);
    subscriber.end(true);

    broker = await o.start();
    const publisher = await connect(broker.port, options('crash-publisher'));
    await publishAndKillOnPuback(publisher, broker, `${root}/state/valve`, 'open', true);
    publisher.end(true);

    broker = await o.start();
    const reader = await connectWithInbox(broker.port, options('crash-reader'));
    await subscribe(reader.client, `${root}/state/#`, 1);
    expect((await reader.inbox.until((m) => m.topic === `${root}/state/valve`)).payload).to.equal('open');
    reader.client.end(true);
    const publisher2 = await connect(broker.port, options('crash-publisher'));
    await publishAndKillOnPuback(publisher2, broker, `${root}/queue/setpoint`, '42', false);
    publisher2.end(true);

    broker = await o.start();
    const back = await connectWithInbox(broker.port, session);
    expect(await sessionPresent(back.client), 'sessionPresent').to.equal(true);
    expect((await back.inbox.until((m) => m.topic === `${root}/queue/setpoint`)).payload).to.equal('42');
    back.client.end(true);
    const reader2 = await connectWithInbox(broker.port, options('crash-reader'));
    await subscribe(reader2.client, `${root}/state/#`, 1);
    expect((await reader2.inbox.until((m) => m.topic === `${root}/state/valve`)).payload).to.equal('open');
    reader2.client.end(true);
  } finally {
    await broker.stop();
  }
}

/** The sessionPresent flag of the client's CONNACK. */
export function sessionPresent(client: MqttClient): boolean {
  return (client as unknown as { connackPacket?: { sessionPresent?: boolean } }).connackPacket?.sessionPresent === true;
}

// The MQTT permission cases every broker gatewayd decides for goes through: the embedded broker
// (test/mqtt-permission-cases.test.ts) and a RabbitMQ cluster with gatewayd as its HTTP auth
// backend (test/broker-hooks-rabbitmq.test.ts). One table, one runner; a broker only says where
// its clients connect and whether it can rewrite a publish topic (the publish prefix).
// MQTT 3.1.1 throughout (RabbitMQ 3.10's MQTT plugin speaks nothing newer), so a refused publish
// ends the connection on every broker, and a refused subscription is a SUBACK 0x80 (embedded)
// or a closed connection (RabbitMQ 3.10): both count as refused.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect } from 'chai';
import mqtt, { type MqttClient } from 'mqtt';
import { GOOD_PASSWORD, type TestGateway } from './harness.js';
import { clientOptions, collect, connect, runCli, startMosquittoSub, subscribe, withTimeout } from './mqtt-test-kit.js';

const run = promisify(execFile);

export type Grant = { resource: string; operation: 'read' | 'write' | 'readWrite'; context: 'mqtt' | 'http' };
const mqttGrant = (resource: string, operation: Grant['operation'] = 'readWrite'): Grant => ({ resource, operation, context: 'mqtt' });

export interface PermissionCase {
  name: string;
  grants: Grant[];
  prefix?: string;
  /** The secret the client signs in with. */
  login: 'password' | 'wrong password' | 'token' | "another user's token";
  /** The user is enrolled in MFA (its token then comes from the MFA login). */
  mfa?: boolean;
  /** Done to the user over REST before the client connects. */
  before?: 'delete user' | 'revoke tokens' | { replacePermissions: Grant[] };
  /** Only on brokers that deliver on a rewritten topic (true) or only on those that cannot (false). */
  rewritingBrokers?: boolean;
  action: { connect: true } | { publish: string; deliveredOn?: string } | { subscribe: string; probe: string };
  expect: 'allowed' | 'refused';
}

/** The table. Each case makes its own user, so cases are independent of each other and of order. */
export const PERMISSION_CASES: readonly PermissionCase[] = [
  { name: 'password login of a user with an MQTT grant', grants: [mqttGrant('plant/#')], login: 'password', action: { connect: true }, expect: 'allowed' },
  { name: 'a wrong password', grants: [mqttGrant('plant/#')], login: 'wrong password', action: { connect: true }, expect: 'refused' },
  { name: 'a session token as password', grants: [mqttGrant('plant/#')], login: 'token', action: { connect: true }, expect: 'allowed' },
  { name: "another user's session token", grants: [mqttGrant('plant/#')], login: "another user's token", action: { connect: true }, expect: 'refused' },
  { name: 'a user without any MQTT permission', grants: [{ resource: '/api/session', operation: 'read', context: 'http' }], login: 'password', action: { connect: true }, expect: 'refused' },
  { name: 'an MFA-enrolled user with its bare password', grants: [mqttGrant('plant/#')], mfa: true, login: 'password', action: { connect: true }, expect: 'refused' },
  { name: 'an MFA-enrolled user with the token of its MFA login', grants: [mqttGrant('plant/#')], mfa: true, login: 'token', action: { connect: true }, expect: 'allowed' },
  { name: 'a deleted user', grants: [mqttGrant('plant/#')], login: 'password', before: 'delete user', action: { connect: true }, expect: 'refused' },
  { name: 'a revoked session token', grants: [mqttGrant('plant/#')], login: 'token', before: 'revoke tokens', action: { connect: true }, expect: 'refused' },
  { name: 'publish inside a + wildcard write grant', grants: [mqttGrant('plant/line1/+/temp', 'write')], login: 'password', action: { publish: 'plant/line1/m1/temp' }, expect: 'allowed' },
  { name: 'publish outside the write grant', grants: [mqttGrant('plant/line1/+/temp', 'write')], login: 'password', action: { publish: 'plant/line2/m1/temp' }, expect: 'refused' },
  { name: 'publish with a read-only grant', grants: [mqttGrant('plant/#', 'read')], login: 'token', action: { publish: 'plant/a' }, expect: 'refused' },
  { name: 'publish to $SYS with a # grant', grants: [mqttGrant('#', 'write')], login: 'password', action: { publish: '$SYS/broker/fake' }, expect: 'refused' },
  { name: 'subscribe with the granted + wildcard filter', grants: [mqttGrant('plant/+/+/temp', 'read')], login: 'password', action: { subscribe: 'plant/+/+/temp', probe: 'plant/l9/m9/temp' }, expect: 'allowed' },
  { name: 'subscribe below a # grant', grants: [mqttGrant('cell/#', 'read')], login: 'token', action: { subscribe: 'cell/7/+', probe: 'cell/7/status' }, expect: 'allowed' },
  { name: 'subscribe wider than the grant', grants: [mqttGrant('plant/+/+/temp', 'read')], login: 'password', action: { subscribe: 'plant/#', probe: 'plant/x' }, expect: 'refused' },
  { name: 'subscribe with a write-only grant', grants: [mqttGrant('cell/#', 'write')], login: 'password', action: { subscribe: 'cell/#', probe: 'cell/1' }, expect: 'refused' },
  { name: 'publish after the permission was revoked over REST', grants: [mqttGrant('plant/#')], login: 'password', before: { replacePermissions: [mqttGrant('other/#')] }, action: { publish: 'plant/a' }, expect: 'refused' },
  // The publish prefix: a broker that rewrites topics prefixes them (as the embedded broker
  // does); one that cannot only lets the user publish under its prefix.
  { name: 'prefixed user: a bare topic is published under the prefix', grants: [mqttGrant('site-7/#', 'write')], prefix: 'site-7/', rewritingBrokers: true, login: 'password', action: { publish: 'pump/state', deliveredOn: 'site-7/pump/state' }, expect: 'allowed' },
  { name: 'prefixed user: the prefixed topic is checked, not the bare one', grants: [mqttGrant('pump/#', 'write')], prefix: 'site-7/', rewritingBrokers: true, login: 'password', action: { publish: 'pump/state' }, expect: 'refused' },
  { name: 'prefixed user: a topic outside the prefix', grants: [mqttGrant('#', 'write')], prefix: 'site-7/', rewritingBrokers: false, login: 'password', action: { publish: 'pump/state' }, expect: 'refused' },
  { name: 'prefixed user: a topic under the prefix', grants: [mqttGrant('site-7/#', 'write')], prefix: 'site-7/', rewritingBrokers: false, login: 'password', action: { publish: 'site-7/pump/state' }, expect: 'allowed' },
];

export type ClientTool = 'mqtt.js' | 'mosquitto';

/** Where the case's clients go: the observer (a subscriber to `#` that sees what was delivered) and the client under test. */
export interface CaseBroker {
  rewritesTopics: boolean;
  /** Port of the client under test. */
  port: number;
  /** Port of the observer (another node of a cluster: deliveries cross it). */
  observerPort: number;
}

export function casesFor(rewritesTopics: boolean): PermissionCase[] {
  return PERMISSION_CASES.filter((c) => c.rewritingBrokers === undefined || c.rewritingBrokers === rewritesTopics);
}

let serial = 0;

/** The TOTP of a base32 secret now, from oathtool. */
async function otpNow(secret: string): Promise<string> {
  return (await run('oathtool', ['--totp', '-b', secret])).stdout.trim();
}

/** A user as the case wants it, and the secret its client signs in with. */
async function prepare(gw: TestGateway, admin: string, c: PermissionCase): Promise<{ username: string; secret: string }> {
  const username = `case-${process.pid}-${++serial}`;
  const created = await gw.api('POST', '/api/users', {
    token: admin,
    body: { username, password: GOOD_PASSWORD, identityProvider: 'local', initialPermissions: c.grants, ...(c.prefix ? { mqttPublishPrefix: c.prefix } : {}) },
  });
  expect(created.status, JSON.stringify(created.body)).to.equal(201);
  const id = created.body.id as string;
  let token = await gw.login(username, GOOD_PASSWORD);
  if (c.mfa) {
    const enable = await gw.api('POST', '/api/mfa/enable', { token });
    const mfaSecret = new URL(enable.body.uri).searchParams.get('secret')!;
    const validate = await gw.api('POST', '/api/mfa/validate', { token, body: { otp: await otpNow(mfaSecret) } });
    expect(validate.status, JSON.stringify(validate.body)).to.equal(200);
    const first = await gw.api('POST', '/api/login', { body: { username, password: GOOD_PASSWORD } });
    expect(first.body.needsMfa).to.equal(true);
    // A backup code, not a second OTP: no wait for the next TOTP step.
    const second = await gw.api('POST', '/api/mfa/login', { body: { username, secret: first.body.secret, backupCode: validate.body.backupCodes[0] } });
    expect(second.status, JSON.stringify(second.body)).to.equal(200);
    token = second.body.token;
  }
  let secret = c.login === 'password' ? GOOD_PASSWORD : c.login === 'wrong password' ? 'Wrong-Passw0rd' : token;
  if (c.login === "another user's token") secret = (await gw.userWith([mqttGrant('x/#')])).token;
  if (c.before === 'delete user') expect((await gw.api('DELETE', `/api/users/${id}`, { token: admin })).status).to.equal(200);
  if (c.before === 'revoke tokens') expect((await gw.api('DELETE', `/api/users/${id}/tokens`, { token: admin })).status).to.equal(200);
  if (typeof c.before === 'object') expect((await gw.api('PUT', `/api/users/${id}`, { token: admin, body: { permissions: c.before.replacePermissions } })).status).to.equal(200);
  return { username, secret };
}

/** The observer: the administrator subscribed to `#` (and `$SYS/#` is no business of the cases). */
export async function startObserver(port: number, adminToken: string): Promise<{ client: MqttClient; inbox: ReturnType<typeof collect> }> {
  // Not through connect(): endAllClients() after each test must leave it running.
  const client = await mqtt.connectAsync(clientOptions(port, { username: 'admin', password: adminToken, clientId: `observer-${process.pid}-${++serial}` }));
  const inbox = collect(client);
  expect(await subscribe(client, '#', 1)).to.deep.equal([1]);
  return { client, inbox };
}

/**
 * Runs one case with one client tool and asserts its outcome. `observer` sees every delivery;
 * a refused publish is proven by the closed connection and by a marker the observer receives
 * after it (what was refused never arrives).
 */
export async function runPermissionCase(o: {
  gw: TestGateway;
  admin: string;
  broker: CaseBroker;
  observer: { client: MqttClient; inbox: ReturnType<typeof collect> };
  tool: ClientTool;
  c: PermissionCase;
}): Promise<void> {
  const { gw, admin, broker, observer, tool, c } = o;
  const { username, secret } = await prepare(gw, admin, c);
  const clientId = `${tool === 'mqtt.js' ? 'js' : 'mq'}-${process.pid}-${++serial}`;
  const payload = `payload-${clientId}`;
  const cli = ['-V', 'mqttv311', '-h', '127.0.0.1', '-p', String(broker.port), '-u', username, '-P', secret, '-i', clientId];
  const what = `${c.name} (${tool})`;

  if ('connect' in c.action) {
    let accepted: boolean;
    if (tool === 'mqtt.js') {
      accepted = await connect(broker.port, { username, password: secret, clientId }).then(
        (client) => (client.end(true), true),
        (err: { code?: number }) => {
          expect(err.code, `${what}: a CONNACK refusal`).to.be.oneOf([4, 5]);
          return false;
        },
      );
    } else {
      // A publish inside the grant of every connect case (plant/#), so only the login can fail.
      const res = await runCli('mosquitto_pub', [...cli, '-t', 'plant/connect', '-m', payload, '-q', '1']);
      accepted = res.code === 0;
      if (!accepted) expect(res.stderr, what).to.match(/not authori[sz]ed|bad user name or password|Connection Refused/i);
    }
    expect(accepted ? 'allowed' : 'refused', what).to.equal(c.expect);
    return;
  }

  if ('publish' in c.action) {
    const topic = c.action.publish;
    const deliveredOn = c.action.deliveredOn ?? topic;
    let published: boolean;
    if (tool === 'mqtt.js') {
      const client = await connect(broker.port, { username, password: secret, clientId });
      // MQTT 3.1.1: a refused publish ends the connection (no PUBACK ever comes).
      const gone = new Promise<boolean>((resolve) => client.once('close', () => resolve(false)));
      published = await withTimeout(Promise.race([client.publishAsync(topic, payload, { qos: 1 }).then(() => true), gone]), 10_000, `${what}: neither PUBACK nor close`);
      client.end(true);
    } else {
      const res = await runCli('mosquitto_pub', [...cli, '-t', topic, '-m', payload, '-q', '1']);
      published = res.code === 0;
    }
    if (c.expect === 'allowed') {
      expect(published, `${what}: PUBACK`).to.equal(true);
      expect((await observer.inbox.until((m) => m.payload === payload, 10_000)).topic, what).to.equal(deliveredOn);
    } else {
      expect(published, `${what}: refused`).to.equal(false);
      const marker = `marker-${clientId}`;
      await observer.client.publishAsync('case/marker', marker, { qos: 1 });
      await observer.inbox.until((m) => m.payload === marker, 10_000);
      expect(observer.inbox.messages.map((m) => m.payload), `${what}: never delivered`).to.not.include(payload);
    }
    return;
  }

  const { subscribe: filter, probe } = c.action;
  let granted: boolean;
  let received: () => Promise<string | undefined>;
  if (tool === 'mqtt.js') {
    const client = await connect(broker.port, { username, password: secret, clientId });
    const inbox = collect(client);
    granted = await subscribe(client, filter, 1).then(
      (codes) => codes[0] !== 0x80,
      () => false, // RabbitMQ 3.10 closes the connection instead of a SUBACK 0x80
    );
    received = () => inbox.until((m) => m.payload === payload, 10_000).then((m) => m.topic);
    if (!granted) client.end(true);
  } else {
    const sub = await startMosquittoSub([...cli, '-t', filter, '-q', '1', '-C', '1', '-v']).catch(() => undefined); // undefined: closed before a SUBACK
    // A SUBACK 0x80 is printed as the code 128; mosquitto_sub then ends by itself.
    granted = sub !== undefined && sub.granted[0] !== 128;
    if (sub && !granted) sub.kill();
    received = async () => {
      const out = (await sub!.result).stdout;
      return out.split('\n').find((l) => l.endsWith(` ${payload}`))?.split(' ')[0];
    };
  }
  expect(granted ? 'allowed' : 'refused', `${what}: SUBACK`).to.equal(c.expect);
  if (granted) {
    await observer.client.publishAsync(probe, payload, { qos: 1 });
    expect(await received(), `${what}: delivered`).to.equal(probe);
  }
}

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

const quiet = fileURLToPath(new URL('../src/quiet-debug.js', import.meta.url));

// In a fresh process (modules are cached per process): quiet the `debug` module, then create
// instances as the libraries do, through mqtt-packet's own resolution of it, and call them.
const probe = `
import { createRequire } from 'node:module';
const { quietDisabledDebug } = await import(${JSON.stringify(quiet)});
const installed = quietDisabledDebug();
const here = createRequire(${JSON.stringify(quiet)});
const fromMqttPacket = createRequire(createRequire(here.resolve('aedes')).resolve('mqtt-packet'));
const createDebug = fromMqttPacket('debug');
const a = createDebug('mqtt-packet:parser');
const b = createDebug('express:router');
a('written only when enabled %s', 'x');
const mqtt = fromMqttPacket('mqtt-packet');
const bytes = mqtt.generate({ cmd: 'publish', topic: 't/1', payload: Buffer.from('p'), qos: 0, retain: false, dup: false });
const parser = mqtt.parser();
let parsed;
parser.on('packet', (p) => (parsed = p));
parser.parse(bytes);
console.log(JSON.stringify({ installed, shared: a === b, enabledA: a.enabled, enabledB: b.enabled, extendCallable: typeof a.extend('sub') === 'function', parsedTopic: parsed && parsed.topic, again: quietDisabledDebug() }));
`;

function run(env: Record<string, string>): { out: Record<string, unknown>; err: string } {
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', probe], { encoding: 'utf8', timeout: 30_000, env: { PATH: process.env.PATH ?? '', ...env } });
  if (result.status !== 0) throw new Error(`probe failed: ${result.stderr}`);
  return { out: JSON.parse(result.stdout.trim()) as Record<string, unknown>, err: result.stderr };
}

describe('quiet debug (disabled debug instances cost nothing)', function () {
  this.timeout(60_000);

  it('gives every namespace DEBUG does not enable one shared no-op, and mqtt-packet still works', () => {
    const { out } = run({});
    expect(out).to.deep.equal({ installed: true, shared: true, enabledA: false, enabledB: false, extendCallable: true, parsedTopic: 't/1', again: true });
  });

  it('keeps real instances for the namespaces DEBUG names, which still write', () => {
    const { out, err } = run({ DEBUG: 'mqtt-packet:*' });
    expect(out).to.include({ installed: true, shared: false, enabledA: true, enabledB: false, parsedTopic: 't/1' });
    expect(err).to.include('mqtt-packet:parser written only when enabled x');
  });
});

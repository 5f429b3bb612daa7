import { PassThrough } from 'node:stream';
import { expect } from 'chai';
import sinon from 'sinon';
import { createLogger } from '../src/log/index.js';

/** A logger writing into memory; the parsed lines. */
function capture(level: string) {
  const stream = new PassThrough();
  const lines: Record<string, unknown>[] = [];
  stream.on('data', (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
  });
  return { log: createLogger({ level, stream }), lines };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('logger levels', () => {
  it('drops debug lines at info (before winston formats them) and keeps info and audit lines', async () => {
    const { log, lines } = capture('info');
    const child = log.child({ component: 'mqtt' });
    child.debug('mqtt client disconnected', { clientId: 'c1' });
    child.info('mqtt client connected', { clientId: 'c1' });
    child.audit('mqtt.connect.refused', { clientId: 'c2' });
    await settle();
    expect(lines.map((l) => l.message)).to.deep.equal(['mqtt client connected', 'mqtt.connect.refused']);
    expect(lines[0]).to.include({ level: 'info', component: 'mqtt', clientId: 'c1' });
  });

  it('writes debug lines at debug, with secrets redacted', async () => {
    const { log, lines } = capture('debug');
    log.child({ component: 'mqtt' }).debug('mqtt client disconnected', { clientId: 'c1', password: 'Secret-1' });
    await settle();
    expect(lines).to.have.length(1);
    expect(lines[0]).to.include({ level: 'debug', message: 'mqtt client disconnected', component: 'mqtt', clientId: 'c1', password: '[redacted]' });
  });

  it('writes each line at once, as winston did: inner child fields over outer, the call over both, audit at any level', () => {
    const stream = new PassThrough();
    const log = createLogger({ level: 'error', stream });
    const child = log.child({ component: 'outer', site: 'a' }).child({ component: 'inner' });
    child.warn('dropped at error');
    child.error('failed', { site: 'b', message: 'detail', token: 'Secret-1' });
    child.audit('user created', { userId: 'u1' });
    // Written synchronously: no tick needed before the lines are in the stream.
    const lines = String(stream.read() ?? '').trim().split('\n');
    expect(lines).to.have.length(2);
    // Keys sorted (winston's JSON format), message joined with a field named message.
    expect(lines[0]).to.match(/^\{"component":"inner","level":"error","message":"failed detail","site":"b","timestamp":"[^"]+","token":"\[redacted\]"\}$/);
    expect(JSON.parse(lines[1]!)).to.include({ audit: true, component: 'inner', site: 'a', level: 'info', message: 'user created', userId: 'u1' });
    // An unknown level logs nothing but audit and lifecycle lines.
    const quiet = new PassThrough();
    const unknown = createLogger({ level: 'verbose-ish', stream: quiet });
    unknown.error('not written');
    unknown.lifecycle('ready');
    expect(JSON.parse(String(quiet.read()))).to.include({ level: 'info', message: 'ready' });
  });
});

describe('logger lines', () => {
  it('stamps each line as new Date().toISOString() would, across millisecond, second and day boundaries', () => {
    const clock = sinon.useFakeTimers({ now: 0, toFake: ['Date'] });
    try {
      const stream = new PassThrough();
      const direct = createLogger({ level: 'info', stream });
      const instants = [0, 1, 9, 10, 99, 100, 999, 1000, 1001, 59_999, 60_000, 86_399_999, 86_400_000, 1_735_689_599_999, 1_735_689_600_000, 1_735_689_600_042, 1_735_689_600_042, 1_735_689_600_500];
      const stamps: string[] = [];
      for (const t of instants) {
        clock.setSystemTime(t);
        direct.info('tick', { n: t });
        stamps.push((JSON.parse(String(stream.read())) as { timestamp: string }).timestamp);
      }
      expect(stamps).to.deep.equal(instants.map((t) => new Date(t).toISOString()));
    } finally {
      clock.restore();
    }
  });

  it('writes flat records byte for byte as winston formats them (sorted keys, redaction, escapes, numbers, arrays of those)', async () => {
    const { default: winston } = await import('winston');
    const format = winston.format.combine(winston.format.timestamp(), winston.format.json());
    const records: Record<string, unknown>[] = [
      { clientId: 'c-1', username: 'u', anonymous: undefined, transport: 'tcp', remote: '127.0.0.1' },
      { Password: 'x', TOKEN: 'y', secret: 'z', cookie: 'c' },
      { text: 'quote " backslash \\ newline \n tab \t ctrl \u0001 del \u007f é 😀 lone \ud800 end', z: '', a: 'first' },
      { n: 0, m: -0, big: 1e21, small: 1e-7, nan: NaN, inf: -Infinity, float: 3.25, neg: -12 },
      { yes: true, no: false, nothing: null, timestamp: 'theirs', message_: 'm' },
      { 'é': 1, Z: 2, a: 3, '10': 4, '9': 5, _: 6 },
      { roles: ['r-1', 'quote " é \ud800'], nums: [1, NaN, -0, 1e21, -Infinity], empty: [], mixed: [true, null, 'x', false] },
    ];
    for (const fields of records) {
      const stream = new PassThrough();
      createLogger({ level: 'info', stream }).child({ component: 'mqtt' }).info('line', fields);
      const fast = String(stream.read()).trimEnd();
      // What winston made of the same record (redaction as the logger's format does it, top level).
      const info: Record<string | symbol, unknown> = { component: 'mqtt', ...fields, level: 'info', message: 'line' };
      info[Symbol.for('level')] = 'info';
      for (const key of Object.keys(info)) if (key !== 'level' && key !== 'message' && /^(password|token|secret|cookie)$/i.test(key)) info[key] = '[redacted]';
      const out = format.transform(info as never, format.options) as Record<symbol, string>;
      const expected = out[Symbol.for('message')]!;
      const strip = (line: string) => line.replace(/"timestamp":"[^"]+"/, '"timestamp":"T"');
      expect(strip(fast), JSON.stringify(fields)).to.equal(strip(expected));
    }
    // The same lines through child loggers, each call made twice (the second from the layout
    // the first left) and with changing field names under one message.
    const winstonLine = (meta: Record<string, unknown>[], msg: string, fields: Record<string, unknown>) => {
      const info: Record<string | symbol, unknown> = Object.assign({}, ...meta, fields, { level: 'warn', message: msg });
      if (fields.message) info.message = `${msg} ${String(fields.message)}`;
      info[Symbol.for('level')] = 'warn';
      for (const key of Object.keys(info)) if (key !== 'level' && key !== 'message' && /^(password|token|secret|cookie)$/i.test(key)) info[key] = '[redacted]';
      return (format.transform(info as never, format.options) as Record<symbol, string>)[Symbol.for('message')]!;
    };
    const outer = { component: 'mqtt', shadowed: 'outer', token: 'child-secret', timestamp: 'child', list: ['a', 1] };
    const inner = { part: 'auth', shadowed: 'inner', gone: undefined, level: 'child-level' };
    const calls: Record<string, unknown>[] = [
      ...records,
      { shadowed: 'call', extra: 1 },
      { shadowed: undefined, extra: 2 },
      { extra: 3, shadowed: 'order' },
      {},
      { message: 'appended', extra: 4 },
      { level: 'field-level', message: '' },
    ];
    const stream2 = new PassThrough();
    const child = createLogger({ level: 'info', stream: stream2 }).child(outer).child(inner);
    for (const fields of [...calls, ...calls]) {
      child.warn('same message', fields);
      const fast = String(stream2.read()).trimEnd();
      const strip = (line: string) => line.replace(/"timestamp":"[^"]+"/, '"timestamp":"T"');
      expect(strip(fast), JSON.stringify(fields)).to.equal(strip(winstonLine([outer, inner], 'same message', fields)));
    }
    // A child field that is not flat: winston formats every line of that logger.
    const stream3 = new PassThrough();
    createLogger({ level: 'info', stream: stream3 }).child({ nested: { password: 'p' } }).info('m', { a: 1 });
    expect(JSON.parse(String(stream3.read()))).to.deep.include({ nested: { password: '[redacted]' }, a: 1 });
    // Objects still go through winston (redacted at any depth).
    const stream = new PassThrough();
    createLogger({ level: 'info', stream }).info('nested', { user: { name: 'n', password: 'p' }, list: [1, { token: 't' }] });
    expect(JSON.parse(String(stream.read()))).to.deep.include({ user: { name: 'n', password: '[redacted]' }, list: [1, { token: '[redacted]' }] });
  });
});


// A fuzz pass over every operation of the OpenAPI document (issue 11 point 4, issue 35 B),
// generated from the document itself (test/fuzz/wire/rest-cases.ts): for each path, query and body
// field, each constraint violated one at a time (type, bounds, lengths, items, enum, required,
// extra properties), `__proto__` keys, 1e309, NaN, 10,000 nested arrays, naughty strings, wrong
// media types, malformed and oversized bodies, sent by the administrator (who gets furthest into
// the code). No answer may be a 5xx (but 501 and 503), a 4xx has the contract's error shape and
// leaves the store exactly as it was, no promise is left rejected, and the daemon keeps
// answering. Deterministic (no randomness) and bounded: a fixed list of cases per operation.
import { expect } from 'chai';
import { startGateway, type TestGateway } from './support/harness.js';
import { storeDigest } from './support/store-digest.js';
import { casesOf, errorShapeProblem, loadSpec, operations } from './fuzz/wire/rest-cases.js';

describe('fuzz over the OpenAPI document', function () {
  this.timeout(300_000);
  let gw: TestGateway;
  let admin: string;
  const rejections: unknown[] = [];
  const onRejection = (reason: unknown) => rejections.push(reason);

  before(async () => {
    gw = await startGateway();
    admin = await gw.login();
    process.on('unhandledRejection', onRejection);
  });
  after(async () => {
    process.removeListener('unhandledRejection', onRejection);
    await gw.stop();
  });

  it('never answers 5xx, answers 4xx in the contract\'s shape, and changes nothing on a refused request', async () => {
    const spec = loadSpec();
    let sent = 0;
    const problems: string[] = [];
    for (const operation of operations(spec)) {
      for (const c of casesOf(spec, operation)) {
        const before = storeDigest(gw);
        const res = await gw.api(c.method, c.path, {
          token: admin,
          ...(c.body !== undefined ? { raw: c.body, headers: { 'content-type': c.contentType ?? 'application/json' } } : {}),
        });
        sent++;
        const what = `${c.key} [${c.label}] -> ${res.status}`;
        if (res.status >= 500 && res.status !== 501 && res.status !== 503) problems.push(`${what} ${JSON.stringify(res.body).slice(0, 200)}`);
        if (res.status >= 400 && res.status < 500) {
          const shape = errorShapeProblem(res.status, res.body);
          if (shape) problems.push(`${what}: ${shape}`);
          if (storeDigest(gw) !== before) problems.push(`${what} but the store changed`);
        }
      }
    }
    expect(problems, problems.join('\n')).to.deep.equal([]);
    console.log(`      ${sent} requests`);
    expect(sent).to.be.above(3000);
    expect(rejections.map(String), 'unhandled rejections').to.deep.equal([]);
    expect((await gw.api('GET', '/api/session', { token: admin })).status, 'still answering, admin session intact').to.equal(200);
  });
});

import { expect } from 'chai';
import sinon from 'sinon';
import { startGateway, type TestGateway } from './support/harness.js';

describe('HTTP errors', () => {
  let gw: TestGateway;
  let token: string;
  before(async () => {
    gw = await startGateway({ overrides: { http: { bodyLimitBytes: 4096 } } });
    token = await gw.login();
  });
  after(() => gw.stop());
  afterEach(() => sinon.restore());

  const expectErrorBody = (body: any, status: number) => {
    expect(body).to.include.keys('statusCode', 'error', 'message');
    expect(body.statusCode).to.equal(status);
    expect(body.message).to.be.a('string').and.not.match(/at .*\.js:\d+/);
  };

  it('answers an unknown route with a JSON 404', async () => {
    const res = await gw.api('GET', '/api/does-not-exist', { token });
    expect(res.status).to.equal(404);
    expect(res.headers.get('content-type')).to.match(/application\/json/);
    expectErrorBody(res.body, 404);
  });

  it('answers a path outside the API with JSON too, never HTML', async () => {
    const res = await gw.api('GET', '/nothing-here');
    expect(res.status).to.equal(404);
    expect(res.headers.get('content-type')).to.match(/application\/json/);
    expectErrorBody(res.body, 404);
  });

  it('answers a body that is not JSON with 400', async () => {
    const res = await gw.api('POST', '/api/login', { raw: '{"username":', headers: { 'content-type': 'application/json' } });
    expect(res.status).to.equal(400);
    expectErrorBody(res.body, 400);
    expect(res.body.message).to.equal('request body is not valid JSON');
  });

  it('answers a validation failure with 400 and the errors list', async () => {
    const res = await gw.api('POST', '/api/users', { token, body: { username: 'ab', identityProvider: 'local', bogus: 1 } });
    expect(res.status).to.equal(400);
    expectErrorBody(res.body, 400);
    expect(res.body.errors).to.be.an('array').that.is.not.empty;
    expect(res.body.errors[0]).to.have.keys('path', 'message');
  });

  it('answers a body over the limit with 413', async () => {
    const res = await gw.api('POST', '/api/login', { body: { username: 'admin', password: 'x'.repeat(8000) } });
    expect(res.status).to.equal(413);
    expectErrorBody(res.body, 413);
  });

  it('answers a wrong method with 405', async () => {
    const res = await gw.api('PATCH', '/api/roles', { token, body: {} });
    expect(res.status).to.equal(405);
    expectErrorBody(res.body, 405);
  });

  it('answers an unexpected failure with 500 and a correlation id that is in the log, without the cause', async () => {
    sinon.stub(gw.services.roles, 'names').throws(new Error('disk on fire: secret detail'));
    const res = await gw.api('GET', '/api/roles/names', { token });
    expect(res.status).to.equal(500);
    expectErrorBody(res.body, 500);
    expect(JSON.stringify(res.body)).to.not.include('disk on fire');
    const id = res.body.correlationId;
    expect(id).to.be.a('string');
    const logged = gw.logs().find((l) => l.correlationId === id);
    expect(logged, 'the 500 is logged with its correlation id').to.not.equal(undefined);
    expect(JSON.stringify(logged)).to.include('disk on fire');
  });
});

describe('HTTP app without a route for a declared operation', () => {
  it('answers 501 with the JSON error body, never fake data', async () => {
    // Every operation of the contract has a route in the gateway; the fallback stays for a
    // declared operation whose part is not wired (e.g. switched off), so build the app bare.
    const { createHttpApp } = await import('../src/http/create-http-app.js');
    const { createSilentLogger } = await import('../src/log/index.js');
    const { createServer } = await import('node:http');
    const app = createHttpApp({
      log: createSilentLogger(),
      bodyLimitBytes: 4096,
      logRequests: false,
      trustProxy: false,
      authenticate: async () => {
        throw new Error('public operation: never asked');
      },
      engine: { allows: () => false } as never,
      routes: [],
    });
    const server = createServer(app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as { port: number };
      const res = await fetch(`http://127.0.0.1:${port}/api/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username: 'admin', password: 'whatever' }),
      });
      expect(res.status).to.equal(501);
      const body = (await res.json()) as { statusCode: number; error: string; message: string };
      expect(body).to.deep.equal({ statusCode: 501, error: 'Not Implemented', message: 'POST /api/login is not implemented yet' });
    } finally {
      server.close();
    }
  });
});

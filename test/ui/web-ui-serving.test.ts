// The daemon serves the built web UI (src/http/web-ui.ts): index.html for `/` and the UI's
// pages, hashed assets with long caching and gzip, the strict CSP and the other security
// headers; the API and unknown paths are not shadowed. And the first page's size budget.
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { request, type IncomingHttpHeaders } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync, gzipSync } from 'node:zlib';
import { webUiContentSecurityPolicy, webUiPages } from '../../src/http/web-ui.js';
import { startGateway, type TestGateway } from '../support/harness.js';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const uiDir = join(repoRoot, 'dist/ui');
const BUDGET_BYTES = 100 * 1024;

interface UiBuildReport {
  firstPage: string[];
  outputs: Record<string, { bytes: number; inputs: string[] }>;
}
const report = (): UiBuildReport => JSON.parse(readFileSync(join(repoRoot, 'dist/ui-build.json'), 'utf8')) as UiBuildReport;

describe('web UI: serving', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway();
  });
  after(async () => {
    await gw.stop();
  });

  const get = (path: string, headers: Record<string, string> = {}) => fetch(gw.baseUrl + path, { headers });
  /** node:http, not fetch: fetch decompresses, and adds Cache-Control: no-cache to conditional requests. */
  const rawGet = (path: string, headers: Record<string, string> = {}) =>
    new Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
      request(gw.baseUrl + path, { headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      })
        .on('error', reject)
        .end();
    });

  it('answers index.html at / and at every page of the UI, with the CSP and no-cache', async () => {
    for (const path of ['/', ...webUiPages.map((p) => `/${p}`), '/users/1234', '/mapping/', '/signin?next=%2Fusers']) {
      const res = await get(path);
      expect(res.status, path).to.equal(200);
      expect(res.headers.get('content-type')).to.equal('text/html; charset=utf-8');
      expect(res.headers.get('content-security-policy')).to.equal(webUiContentSecurityPolicy);
      expect(res.headers.get('x-content-type-options')).to.equal('nosniff');
      expect(res.headers.get('referrer-policy')).to.equal('same-origin');
      expect(res.headers.get('x-frame-options')).to.equal('DENY');
      expect(res.headers.get('cache-control')).to.equal('no-cache');
      const html = await res.text();
      expect(html).to.equal(readFileSync(join(uiDir, 'index.html'), 'utf8'));
    }
  });

  it('sends a policy without inline script, eval or other origins, and a page without inline script', async () => {
    const csp = webUiContentSecurityPolicy;
    expect(csp).to.include("default-src 'self'").and.include("script-src 'self'").and.include("style-src 'self'");
    expect(csp).to.include("frame-ancestors 'none'").and.include("connect-src 'self' ws: wss:").and.include("img-src 'self' data:");
    expect(csp).not.to.match(/unsafe-inline|unsafe-eval|https?:|\*/);
    const html = await (await get('/')).text();
    for (const tag of html.match(/<script\b[^>]*>/g) ?? []) expect(tag).to.match(/ src="\/assets\/[\w-]+\.js"/);
    expect(html).not.to.match(/<script\b[^>]*>[^<]+<\/script>/);
    expect(html).not.to.match(/\sstyle=|<style/);
    expect(html).not.to.match(/https?:\/\//);
  });

  it('serves hashed assets for a year, gzip-encoded when accepted, and revalidates with the ETag', async () => {
    const html = await (await get('/')).text();
    const script = /src="(\/assets\/app-[\w]+\.js)"/.exec(html)![1]!;
    const plain = await get(script, { 'accept-encoding': 'identity' });
    expect(plain.status).to.equal(200);
    expect(plain.headers.get('cache-control')).to.equal('public, max-age=31536000, immutable');
    expect(plain.headers.get('content-type')).to.equal('text/javascript; charset=utf-8');
    expect(plain.headers.get('content-security-policy')).to.equal(webUiContentSecurityPolicy);
    expect(plain.headers.get('content-encoding')).to.equal(null);
    const body = Buffer.from(await plain.arrayBuffer());
    expect(body.equals(readFileSync(join(uiDir, script)))).to.equal(true);

    const gzipped = await rawGet(script, { 'accept-encoding': 'gzip, deflate' });
    expect(gzipped.headers['content-encoding']).to.equal('gzip');
    expect(gunzipSync(gzipped.body).equals(body)).to.equal(true);

    const etag = plain.headers.get('etag')!;
    expect(etag).to.match(/^W\/".+"$/);
    const again = await rawGet(script, { 'if-none-match': etag });
    expect(again.status).to.equal(304);
    expect(again.body.length).to.equal(0);
    const index = await rawGet('/');
    expect((await rawGet('/', { 'if-none-match': index.headers.etag as string })).status).to.equal(304);
    expect((await rawGet('/', { 'if-none-match': '"other"' })).status).to.equal(200);
  });

  it('leaves everything else to the API: unknown paths, other methods, traversal attempts answer JSON errors', async () => {
    for (const path of ['/nothing', '/assets/nope.js', '/assets/..%2Findex.html', '/assets/', '/usersx', '/health-ish']) {
      const res = await get(path);
      expect(res.status, path).to.equal(404);
      expect(res.headers.get('content-type')).to.match(/application\/json/);
      expect(((await res.json()) as { statusCode: number }).statusCode).to.equal(404);
    }
    const post = await fetch(gw.baseUrl + '/', { method: 'POST' });
    expect(post.status).to.equal(404);
    const session = await get('/api/session');
    expect(session.status).to.equal(401);
    expect(session.headers.get('content-type')).to.match(/application\/json/);
  });

  it('keeps the first page (HTML, JS, CSS) under 100 KB gzipped, without mqtt.js or the QR encoder', () => {
    const { firstPage, outputs } = report();
    expect(firstPage[0]).to.equal('index.html');
    expect(firstPage.some((f) => f.endsWith('.js'))).to.equal(true);
    expect(firstPage.some((f) => f.endsWith('.css'))).to.equal(true);
    let total = 0;
    for (const file of firstPage) total += gzipSync(readFileSync(join(uiDir, file)), { level: 9 }).length;
    expect(total).to.be.above(5 * 1024).and.below(BUDGET_BYTES);
    const firstPageInputs = firstPage.flatMap((f) => outputs[f]?.inputs ?? []);
    expect(firstPageInputs.some((i) => i.includes('node_modules/preact/'))).to.equal(true);
    expect(firstPageInputs.filter((i) => i.includes('node_modules/mqtt/') || i.includes('qrcode-generator') || i.includes('pages/topics'))).to.deep.equal([]);
    // The explorer's chunk exists and carries the browser build of mqtt.js.
    const explorer = Object.entries(outputs).filter(([, o]) => o.inputs.some((i) => i.includes('node_modules/mqtt/')));
    expect(explorer.length).to.be.above(0);
    expect(explorer.every(([f]) => !firstPage.includes(f))).to.equal(true);
  });
});

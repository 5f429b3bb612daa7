// Browser tests of the web UI: Debian's headless Chromium driven by playwright-core (pinned),
// one browser per test file, a fresh context (cookies, sessionStorage) per test, against the
// real daemon built by the test harness. A missing browser fails the tests: it never skips them.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { ADMIN_PASSWORD, startGateway, type TestGateway } from '../../support/harness.js';

export const chromiumPath = process.env.GATEWAYD_TEST_CHROMIUM ?? '/usr/bin/chromium-headless-shell';
/** Without the background-networking switches Chromium keeps trying to reach Google and is slow on a closed network. */
const chromiumArgs = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const repoRoot = fileURLToPath(new URL('../../../../', import.meta.url));
export const screenshotDir = join(repoRoot, 'docs/screenshots');

/**
 * `trustCaFile`: the one extra root the browser trusts (the gateway CA, for HTTPS). Chromium on
 * Linux reads the user's NSS database, $HOME/.pki/nssdb: the browser gets a HOME of its own whose
 * database holds that certificate as a trusted CA (certutil, Debian's libnss3-tools), so
 * certificate checking stays fully on; nothing like --ignore-certificate-errors.
 */
export async function launchBrowser(options: { trustCaFile?: string; extraArgs?: string[] } = {}): Promise<Browser> {
  if (!existsSync(chromiumPath)) {
    throw new Error(`headless Chromium not found at ${chromiumPath}: install it (apt-get install chromium-headless-shell; .ci/run does) or set GATEWAYD_TEST_CHROMIUM`);
  }
  const args = [...chromiumArgs, ...(options.extraArgs ?? [])];
  if (!options.trustCaFile) return chromium.launch({ executablePath: chromiumPath, args, timeout: 30_000 });
  const home = mkdtempSync(join(tmpdir(), 'gatewayd-browser-home-'));
  try {
    const db = `sql:${join(home, '.pki', 'nssdb')}`;
    mkdirSync(join(home, '.pki', 'nssdb'), { recursive: true });
    execFileSync('certutil', ['-N', '-d', db, '--empty-password'], { stdio: 'pipe' });
    execFileSync('certutil', ['-A', '-d', db, '-n', 'gatewayd test CA', '-t', 'C,,', '-i', options.trustCaFile], { stdio: 'pipe' });
  } catch (err) {
    rmSync(home, { recursive: true, force: true });
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new Error('certutil not found: install it (apt-get install libnss3-tools; .ci/run does)');
    throw err;
  }
  const browser = await chromium.launch({ executablePath: chromiumPath, args, timeout: 30_000, env: { ...process.env, HOME: home } });
  browser.on('disconnected', () => rmSync(home, { recursive: true, force: true }));
  return browser;
}

export interface BrowserSession {
  readonly browser: Browser;
  readonly context: BrowserContext;
  readonly page: Page;
  /** Console errors and uncaught page errors of the current test. */
  readonly problems: string[];
  /** Every URL the page requested (HTTP and WebSocket) in the current test. */
  readonly requests: string[];
}

/**
 * Mocha hooks for a test file: one browser for the file, one context and page per test.
 * After each test the page must not have logged a Content-Security-Policy violation or thrown.
 * `trustCaFile`: the browser trusts that CA (see launchBrowser); register the hook that creates
 * it (startGateway) before calling useBrowser in the same describe.
 */
export function useBrowser(options: { viewport?: { width: number; height: number }; trustCaFile?: () => string } = {}): BrowserSession {
  let browser: Browser | undefined;
  let context: BrowserContext | undefined;
  let page: Page | undefined;
  let problems: string[] = [];
  let requests: string[] = [];
  const session: BrowserSession = {
    get browser() {
      return browser!;
    },
    get context() {
      return context!;
    },
    get page() {
      return page!;
    },
    get problems() {
      return problems;
    },
    get requests() {
      return requests;
    },
  };
  before(async function () {
    this.timeout(40_000);
    // Read when the hook runs: after the describe's earlier hooks started the gateway and its CA.
    browser = await launchBrowser(options.trustCaFile ? { trustCaFile: options.trustCaFile() } : {});
  });
  after(async () => {
    await browser?.close();
  });
  beforeEach(async () => {
    problems = [];
    requests = [];
    context = await browser!.newContext({
      viewport: options.viewport ?? { width: 1280, height: 800 },
      deviceScaleFactor: 1,
      locale: 'en-US',
      timezoneId: 'UTC',
      reducedMotion: 'reduce',
      acceptDownloads: true,
    });
    context.setDefaultTimeout(10_000);
    page = await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`console: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('request', (r) => requests.push(r.url()));
    page.on('websocket', (ws) => requests.push(ws.url()));
  });
  afterEach(async function () {
    await context?.close();
    const csp = problems.filter((p) => /Content Security Policy|Refused to/i.test(p));
    if (csp.length && this.currentTest?.state !== 'failed') throw new Error(`CSP violations: ${csp.join('\n')}`);
    const thrown = problems.filter((p) => p.startsWith('page error'));
    if (thrown.length && this.currentTest?.state !== 'failed') throw new Error(`uncaught errors in the page: ${thrown.join('\n')}`);
    // No CDN, no font service: nothing but the gateway (and blob: downloads, data: images).
    const elsewhere = requests.filter((u) => !/^(https?|wss?):\/\/127\.0\.0\.1:\d+\//.test(u) && !/^(blob|data):/.test(u));
    if (elsewhere.length && this.currentTest?.state !== 'failed') throw new Error(`requests that left the gateway: ${elsewhere.join(', ')}`);
  });
  return session;
}

/** The real daemon for a test file (test harness: temp data dir, port 0): started before its tests, stopped after. */
export function useGateway(onStart: (gw: TestGateway) => void, overrides?: Record<string, unknown>): void {
  let gw: TestGateway | undefined;
  before(async () => {
    gw = await startGateway(overrides ? { overrides } : {});
    onStart(gw);
  });
  after(async () => {
    await gw?.stop();
  });
}

/** Signs in through the sign-in page and waits for the page the UI goes to. */
export async function signIn(page: Page, baseUrl: string, options: { username?: string; password?: string; path?: string } = {}): Promise<void> {
  await page.goto(baseUrl + (options.path ?? '/'));
  await page.getByLabel('Username').fill(options.username ?? 'admin');
  await page.getByLabel('Password', { exact: true }).fill(options.password ?? ADMIN_PASSWORD);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
}

/** Opens a page of the main navigation by its label, opening its group first (nav.tsx). */
export async function navigateTo(page: Page, label: string): Promise<void> {
  const nav = page.getByRole('navigation', { name: 'Main' });
  const link = nav.getByRole('link', { name: label, exact: true, includeHidden: true });
  if (!(await link.isVisible())) await nav.locator('li.group', { has: page.getByRole('link', { name: label, exact: true, includeHidden: true }) }).getByRole('button').click();
  await link.click();
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[]; failureSummary?: string }[];
}

/** axe-core in the page (evaluated, not an inline script: the CSP stays on): no serious or critical violation. */
export async function expectAccessible(page: Page, what: string): Promise<void> {
  const injected = await page.evaluate('typeof window.axe === "object"');
  if (!injected) await page.evaluate(axeSource);
  const violations = (await page.evaluate(`axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations)`)) as AxeViolation[];
  const serious = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  if (serious.length) {
    const text = serious.map((v) => `${v.impact} ${v.id}: ${v.help}\n  ${v.nodes.map((n) => `${n.target.join(' ')} ${n.failureSummary ?? ''}`).join('\n  ')}`).join('\n');
    throw new Error(`accessibility violations on ${what}:\n${text}`);
  }
}

/**
 * docs/screenshots/<name>.png, overwritten by every run. What changes from run to run
 * (times, ids, fingerprints, countdowns: elements marked data-volatile) is masked, so an
 * unchanged page gives the same picture.
 */
export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(screenshotDir, { recursive: true });
  // Nothing half loaded.
  await page.locator('.loading').first().waitFor({ state: 'detached' });
  // No hover effect where the last click left the pointer, no focus ring where it typed last.
  await page.mouse.move(0, 0);
  await page.evaluate('document.activeElement instanceof HTMLElement && document.activeElement.blur()');
  await page.evaluate('document.fonts.ready.then(() => true)');
  await page.screenshot({
    path: join(screenshotDir, `${name}.png`),
    fullPage: true,
    animations: 'disabled',
    caret: 'hide',
    mask: [page.locator('[data-volatile]')],
    maskColor: '#c9d1d9',
  });
}

/** The page's sessionStorage/localStorage/cookies as the page's scripts see them. */
export async function storageOf(page: Page): Promise<{ session: Record<string, string>; local: Record<string, string>; cookie: string }> {
  return (await page.evaluate(`({ session: { ...sessionStorage }, local: { ...localStorage }, cookie: document.cookie })`)) as {
    session: Record<string, string>;
    local: Record<string, string>;
    cookie: string;
  };
}

// aedes-persistence ships an abstract test suite every persistence must pass. It runs here
// unmodified under its own runner (node:test) in a child process, against the LMDB persistence;
// each of its tests becomes one mocha test, passing or failing with the suite's own assertion.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

const require = createRequire(import.meta.url);
const abstractSuite = require('aedes-persistence/abstract.js') as (options: object) => void;
const runner = fileURLToPath(new URL('./support/abstract-persistence-runner.js', import.meta.url));
const reporter = fileURLToPath(new URL('./support/node-test-json-reporter.js', import.meta.url));

interface AbstractResult {
  number: number;
  name: string;
  ok: boolean;
  error?: string;
}

/** The suite's test names, in order, without running anything. */
function abstractTestNames(): string[] {
  const names: string[] = [];
  abstractSuite({ test: (name: string) => void names.push(name), testAsync: true, persistence: () => undefined });
  return names;
}

function runAbstractSuite(reads: 'pending' | 'disk'): Promise<{ results: AbstractResult[]; stderr: string; code: number | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--test-reporter', reporter, '--test-reporter-destination', 'stdout', runner], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ABSTRACT_READS: reads },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (code) => {
      const results = stdout
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as AbstractResult);
      resolve({ results, stderr, code });
    });
  });
}

const names = abstractTestNames();

for (const [reads, title] of [
  ['pending', 'answered at once (reads see writes LMDB has not committed yet)'],
  ['disk', 'each call after the earlier writes are on disk (reads from LMDB)'],
] as const) {
  describe(`mqtt persistence: the aedes-persistence abstract suite (unmodified) on LMDB, ${title}`, function () {
    this.timeout(180_000);
    let run: Awaited<ReturnType<typeof runAbstractSuite>>;

    before(async () => {
      run = await runAbstractSuite(reads);
    });

    it(`runs all ${names.length} tests of the suite and exits 0`, () => {
      expect(run.results.map((r) => r.name), run.stderr).to.deep.equal(names);
      expect(run.code, run.stderr).to.equal(0);
    });

    names.forEach((name, index) => {
      it(name, () => {
        const result = run.results.find((r) => r.number === index + 1);
        if (!result) throw new Error(`did not run\n${run.stderr}`);
        if (!result.ok) throw new Error(result.error ?? 'failed');
      });
    });
  });
}

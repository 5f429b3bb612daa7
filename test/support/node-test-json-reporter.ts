// A node:test reporter printing one JSON line per finished top-level test, for a mocha test that
// runs a node:test suite in a child process (test/mqtt-persistence-abstract.test.ts).
interface TestEvent {
  type: string;
  data: { name: string; nesting: number; testNumber?: number; details?: { error?: { message?: string; cause?: unknown } } };
}

export default async function* jsonLines(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  for await (const event of source) {
    if ((event.type !== 'test:pass' && event.type !== 'test:fail') || event.data.nesting !== 0) continue;
    const error = event.data.details?.error;
    const cause = error?.cause instanceof Error ? error.cause : undefined;
    yield JSON.stringify({
      number: event.data.testNumber,
      name: event.data.name,
      ok: event.type === 'test:pass',
      error: error ? String(cause?.stack ?? cause?.message ?? error.message) : undefined,
    }) + '\n';
  }
}

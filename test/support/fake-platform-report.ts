// Loaded before the daemon's entry (NODE_OPTIONS=--import=<this file>) by the platform-check
// tests: the one fact a test cannot change for real is replaced, and nothing else. Node's
// diagnostic report names the glibc of FAKE_GLIBC_VERSION ('none': no glibc, as on musl)
// instead of the real one, so the entry's real check runs on it. Every native module the
// process loads (process.dlopen) is appended to the file DLOPEN_LOG: a refusal must come
// before any.
import { appendFileSync } from 'node:fs';

const fake = process.env.FAKE_GLIBC_VERSION;
if (fake) {
  const report = process.report as unknown as { getReport(err?: Error): { header: { glibcVersionRuntime?: string } } };
  const real = report.getReport.bind(report);
  report.getReport = (err?: Error) => {
    const result = real(err);
    if (fake === 'none') delete result.header.glibcVersionRuntime;
    else result.header.glibcVersionRuntime = fake;
    return result;
  };
}

const log = process.env.DLOPEN_LOG;
if (log) {
  const dlopen = process.dlopen;
  process.dlopen = function (this: unknown, ...args: Parameters<typeof process.dlopen>) {
    appendFileSync(log, `${args[1]}\n`);
    return dlopen.apply(this, args);
  } as typeof process.dlopen;
}

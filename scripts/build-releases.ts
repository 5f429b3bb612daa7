// node dist/scripts/build-releases.js: builds the earlier releases the upgrade test starts from
// (scripts/releases.ts; GATEWAYD_UPGRADE_RELEASES picks others) into the cache, once per CI run
// before the suites (.ci/run), so that `npm test` on each Node finds them built. Exits 1 with the
// reason when the git history to build them from is missing.
import { buildRelease, releasesCacheDir, releasesUnderTest, ReleaseHistoryError } from './releases.js';

const started = Date.now();
try {
  const releases = releasesUnderTest();
  for (const release of releases) {
    const t = Date.now();
    const built = await buildRelease(release, { log: (line) => console.log(`  ${line}`) });
    console.log(`release ${release.version} (${release.ref.slice(0, 12)}): ${built.dir} (${((Date.now() - t) / 1000).toFixed(1)} s)`);
  }
  console.log(`${releases.length} earlier releases ready in ${releasesCacheDir()} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
} catch (err) {
  console.error(`build-releases: ${err instanceof ReleaseHistoryError ? err.message : (err as Error).stack ?? String(err)}`);
  process.exit(1);
}

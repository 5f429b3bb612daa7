// Seeds recorded from our own integration traffic (npm run fuzz -- --record: snap7's S7 server,
// the test kit's CIP server and Modbus server answering our drivers), kept as cases of each
// target under test/fuzz/corpus/<target>/ (never third-party captures). A target mixes them
// into its generated cases, as they are and with 1 to 3 mutations of the whole case.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { applyMutations, mutationsArbitrary } from './mutators.js';

const repoRoot = fileURLToPath(new URL('../../../..', import.meta.url));
export const corpusDir = (target: string) => join(repoRoot, 'test/fuzz/corpus', target);

export function loadCorpus(target: string): Uint8Array[] {
  const dir = corpusDir(target);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.bin'))
    .sort()
    .map((f) => new Uint8Array(readFileSync(join(dir, f))));
}

/** The recorded cases of `target`, as they are and mutated; undefined when none were recorded. */
export function corpusArbitrary(target: string): fc.Arbitrary<Uint8Array> | undefined {
  const cases = loadCorpus(target);
  if (!cases.length) return undefined;
  const recorded = fc.constantFrom(...cases);
  return fc.oneof(recorded, fc.tuple(recorded, mutationsArbitrary(recorded)).map(([c, m]) => new Uint8Array(applyMutations(c, [], m))));
}

/** The target's cases with its recorded seeds mixed in (weight 1 of `weight + 1`). */
export function withCorpus(target: string, generated: fc.Arbitrary<Uint8Array>, weight = 6): fc.Arbitrary<Uint8Array> {
  const seeds = corpusArbitrary(target);
  return seeds ? fc.oneof({ weight, arbitrary: generated }, { weight: 1, arbitrary: seeds }) : generated;
}

// A small seeded random source for what is not run by fast-check (the mutating proxy of the
// hostile-peer harness): the same seed gives the same choices, so a run can be repeated.

export interface Random {
  /** A float in [0, 1). */
  next(): number;
  /** An integer in [min, max]. */
  int(min: number, max: number): number;
  /** True with probability p. */
  chance(p: number): boolean;
  pick<T>(items: readonly T[]): T;
  bytes(n: number): Buffer;
}

/** mulberry32: 32 bits of state, fast, good enough to choose mutations. */
export function seededRandom(seed: number): Random {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (min: number, max: number) => min + Math.floor(next() * (max - min + 1));
  return {
    next,
    int,
    chance: (p) => next() < p,
    pick: (items) => items[int(0, items.length - 1)]!,
    bytes: (n) => {
      const b = Buffer.alloc(n);
      for (let i = 0; i < n; i++) b[i] = int(0, 255);
      return b;
    },
  };
}

/** The seed of a run: GATEWAYD_FUZZ_SEED when set (to repeat a run), else a fresh one. */
export function runSeed(): number {
  const fixed = process.env.GATEWAYD_FUZZ_SEED;
  if (fixed !== undefined && fixed !== '') {
    const n = Number(fixed);
    if (!Number.isInteger(n)) throw new Error(`GATEWAYD_FUZZ_SEED must be an integer, got ${fixed}`);
    return n | 0;
  }
  return (Date.now() ^ (process.pid << 16)) | 0;
}

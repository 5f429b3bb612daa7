// The wear budget (docs/footprint.md "Flash"): how much flash fast acknowledgements may spend.
// A token bucket in bytes. It fills at the rate the flash can take for the life wanted,
//   capacity × rated cycles / (write amplification × life in seconds)
// (8 GB, 1,000 cycles, 3, 10 years: 8,450 B/s, 730 MB a day), up to the burst allowance, and
// everything the process writes is taken from it (/proc/self/io write_bytes, read at most once a
// second; a journal frame at once, when it is written). While it holds bytes, a commit starts as
// soon as someone waits for it; once it is empty, commits wait for storage.commitIntervalMs as
// before, until a tenth of the allowance has come back. So the flash lasts the life wanted
// whatever the load, unless the gateway's other writes alone exceed the rate.
import type { Logger } from '../log/index.js';

const SECONDS_PER_YEAR = 365.25 * 24 * 3600;
/** At most one read of /proc/self/io per this many ms. */
const RECONCILE_MS = 1000;
/** Fast acknowledgements come back once this share of the allowance is in the bucket again. */
export const REFILLED_SHARE = 0.1;

export interface WearBudgetSpec {
  capacityBytes: number;
  ratedWriteCycles: number;
  writeAmplification: number;
  /** The life wanted of the flash, years. */
  lifeYears: number;
  /** The bucket's size: what a burst may spend at once (0: no fast acknowledgements). */
  burstBytes: number;
}

/** fast: commits start when someone waits; spent: they wait for the interval; off: burstBytes 0. */
export type WearBudgetMode = 'fast' | 'spent' | 'off';

export interface WearBudgetState {
  mode: WearBudgetMode;
  /** Bytes in the bucket now. */
  availableBytes: number;
  burstBytes: number;
  /** The rate it fills at (bytes per second). */
  bytesPerSecond: number;
  lifeYears: number;
  /** Epoch ms the bucket ran empty (while spent). */
  spentSince: number | null;
  /** Times it ran empty since the start. */
  spentCount: number;
}

export interface WearBudget {
  /** Whether a commit may start as soon as someone waits for it. */
  allowsFast(): boolean;
  /** Bytes the caller is about to write (taken at once; the readings of write_bytes do not count them twice). */
  charge(bytes: number): void;
  state(): WearBudgetState;
  /** Stops its timer. */
  stop(): void;
}

/** Bytes per second the flash can take for `spec.lifeYears` (0 when the life is 0). */
export function budgetBytesPerSecond(spec: Omit<WearBudgetSpec, 'burstBytes'>): number {
  if (spec.lifeYears <= 0) return 0;
  return (spec.capacityBytes * spec.ratedWriteCycles) / (spec.writeAmplification * spec.lifeYears * SECONDS_PER_YEAR);
}

export function createWearBudget(deps: {
  spec: WearBudgetSpec;
  /** The process's write_bytes (undefined where the kernel does not say: then only charges count). */
  readWrittenBytes: () => number | undefined;
  now?: () => number;
  log?: Logger;
}): WearBudget {
  const { spec, log } = deps;
  const now = deps.now ?? Date.now;
  const rate = budgetBytesPerSecond(spec);
  const off = spec.burstBytes <= 0;
  let tokens = spec.burstBytes;
  let mode: WearBudgetMode = off ? 'off' : 'fast';
  let spentSince: number | null = null;
  let spentCount = 0;
  let lastAt = now();
  let reconciledAt = lastAt;
  let written = deps.readWrittenBytes();
  /** Bytes charged since the last reading of write_bytes (they are in its next delta). */
  let charged = 0;
  let timer: NodeJS.Timeout | undefined;

  function refill(): void {
    const t = now();
    if (t > lastAt) tokens = Math.min(spec.burstBytes, tokens + (rate * (t - lastAt)) / 1000);
    lastAt = t;
    if (t - reconciledAt < RECONCILE_MS) return;
    reconciledAt = t;
    const w = deps.readWrittenBytes();
    if (w !== undefined && written !== undefined) {
      // Charged bytes the kernel has not counted yet (a write still under way) stay credited.
      const other = w - written - charged;
      if (other > 0) tokens = Math.max(0, tokens - other);
      charged = Math.max(0, -other);
    } else charged = 0;
    written = w;
  }

  function update(): void {
    if (off) return;
    if (mode === 'fast' && tokens <= 0) {
      mode = 'spent';
      spentSince = now();
      spentCount++;
      log?.warn('storage: the wear budget is spent; acknowledgements that wait for the flash now wait for the commit interval until it refills', {
        burstBytes: spec.burstBytes,
        bytesPerSecond: Math.round(rate),
        lifeYears: spec.lifeYears,
        refilledInSeconds: rate > 0 ? Math.round((REFILLED_SHARE * spec.burstBytes) / rate) : null,
      });
      armRefillCheck();
    } else if (mode === 'spent' && tokens >= REFILLED_SHARE * spec.burstBytes) {
      const seconds = spentSince === null ? 0 : Math.round((now() - spentSince) / 1000);
      mode = 'fast';
      spentSince = null;
      log?.info('storage: the wear budget is refilled; acknowledgements no longer wait for the commit interval', { spentForSeconds: seconds, availableBytes: Math.round(tokens) });
    }
  }

  /** While spent: look again when the bucket should be refilled (the log says so then, not at the next commit). */
  function armRefillCheck(): void {
    if (timer || rate <= 0) return;
    const ms = Math.max(RECONCILE_MS, ((REFILLED_SHARE * spec.burstBytes - tokens) / rate) * 1000);
    timer = setTimeout(() => {
      timer = undefined;
      refill();
      update();
      if (mode === 'spent') armRefillCheck();
    }, Math.min(ms, 2 ** 31 - 1));
    timer.unref();
  }

  return {
    allowsFast() {
      if (off) return false;
      refill();
      update();
      return mode === 'fast';
    },
    charge(bytes) {
      if (bytes <= 0) return;
      refill();
      tokens = Math.max(0, tokens - bytes);
      charged += bytes;
      update();
    },
    state() {
      refill();
      update();
      return { mode, availableBytes: Math.round(tokens), burstBytes: spec.burstBytes, bytesPerSecond: rate, lifeYears: spec.lifeYears, spentSince, spentCount };
    },
    stop() {
      if (timer) clearTimeout(timer);
      timer = undefined;
    },
  };
}

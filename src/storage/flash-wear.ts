// Wear made visible (docs/footprint.md "Flash"): what this process has caused to be written to
// the block device (/proc/self/io `write_bytes`, the kernel's count, journal lines to a pipe not
// included), the commits of the store, and the projected life of the gateway's flash at the last
// hour's rate. The log warns once when that projection falls under storage.flash.warnBelowYears.
// The first sample is taken a minute after the start, so the rate is the gateway's running one
// without its start-up (a first start makes the CA and the commit journal): the method of the
// figures in footprint.md, which measure after a settle.
import { readFileSync } from 'node:fs';
import type { Part } from '../daemon.js';
import type { Logger } from '../log/index.js';
import { WEAR_DEFAULTS } from './storage-defaults.js';
import type { WearBudgetState } from './wear-budget.js';

/** The flash's own write amplification on top of what the process writes (eMMC: 2–4): storage.flash.writeAmplification's default. */
export const WRITE_AMPLIFICATION = 3;
const SECONDS_PER_YEAR = 365.25 * 24 * 3600;
/** One sample a minute, an hour of them: the rate of the projection. */
const SAMPLE_MS = 60_000;
const WINDOW_SAMPLES = 60;

export interface FlashSpec {
  capacityBytes: number;
  ratedWriteCycles: number;
  /** Default WRITE_AMPLIFICATION. */
  writeAmplification?: number;
  /** The life wanted (the wear budget's); default WEAR_DEFAULTS.lifeYears. */
  lifeYears?: number;
  warnBelowYears: number;
}

/** The storage.flash settings a projection assumes. */
export type FlashAssumption = 'capacityBytes' | 'ratedWriteCycles' | 'writeAmplification' | 'lifeYears';

export interface FlashProjection {
  /** Bytes the process caused to be written per second over the window (null: not known yet, or no /proc/self/io). */
  writtenBytesPerSecond: number | null;
  /** Seconds the rate is taken over (up to an hour). */
  windowSeconds: number;
  /** Years until the flash's rated endurance is used at that rate (null: unknown; very large when nothing is written). */
  projectedYears: number | null;
  capacityBytes: number;
  ratedWriteCycles: number;
  writeAmplification: number;
  lifeYears: number;
  /** The assumptions still at their defaults (storage.flash.<name> not set for this flash). */
  defaults: FlashAssumption[];
}

/** The projection with the wear budget's state and the interval commits fall back to (the overview's flash card). */
export interface FlashStatus extends FlashProjection {
  budget: WearBudgetState;
  commitIntervalMs: number;
}

export interface FlashWear {
  /** /proc/self/io write_bytes now (undefined where the kernel does not offer it). */
  writtenBytes(): number | undefined;
  projection(): FlashProjection;
  /** Takes one sample now (the part does it every minute). */
  sample(): void;
  part: Part;
}

/** The process's write_bytes from /proc/self/io (Linux); undefined elsewhere. */
export function readProcessWriteBytes(): number | undefined {
  try {
    const m = /^write_bytes:\s*(\d+)$/m.exec(readFileSync('/proc/self/io', 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Years of rated endurance at `bytesPerSecond` (Infinity when nothing is written). */
export function projectedYears(spec: Pick<FlashSpec, 'capacityBytes' | 'ratedWriteCycles' | 'writeAmplification'>, bytesPerSecond: number): number {
  if (bytesPerSecond <= 0) return Infinity;
  return (spec.capacityBytes * spec.ratedWriteCycles) / ((spec.writeAmplification ?? WRITE_AMPLIFICATION) * bytesPerSecond * SECONDS_PER_YEAR);
}

export function createFlashWear(deps: { flash: FlashSpec; log: Logger; readWrittenBytes?: () => number | undefined; now?: () => number; sampleMs?: number }): FlashWear {
  const read = deps.readWrittenBytes ?? readProcessWriteBytes;
  const now = deps.now ?? Date.now;
  const samples: { at: number; bytes: number }[] = [];
  let warned = false;
  let timer: NodeJS.Timeout | undefined;

  function projection(): FlashProjection {
    const assumed = {
      capacityBytes: deps.flash.capacityBytes,
      ratedWriteCycles: deps.flash.ratedWriteCycles,
      writeAmplification: deps.flash.writeAmplification ?? WRITE_AMPLIFICATION,
      lifeYears: deps.flash.lifeYears ?? WEAR_DEFAULTS.lifeYears,
    };
    const base = { ...assumed, defaults: (Object.keys(assumed) as FlashAssumption[]).filter((k) => assumed[k] === WEAR_DEFAULTS[k]) };
    const first = samples[0];
    const last = samples[samples.length - 1];
    if (!first || !last || last.at <= first.at) return { ...base, writtenBytesPerSecond: null, windowSeconds: 0, projectedYears: null };
    const seconds = (last.at - first.at) / 1000;
    const rate = Math.max(0, last.bytes - first.bytes) / seconds;
    const years = projectedYears(deps.flash, rate);
    return { ...base, writtenBytesPerSecond: rate, windowSeconds: Math.round(seconds), projectedYears: Number.isFinite(years) ? years : null };
  }

  function sample(): void {
    const bytes = read();
    if (bytes === undefined) return;
    samples.push({ at: now(), bytes });
    if (samples.length > WINDOW_SAMPLES + 1) samples.shift();
    // Only over a full hour: the first minutes after a start (the CA, the first backup) are not the gateway's life.
    const p = projection();
    if (!warned && deps.flash.warnBelowYears > 0 && p.windowSeconds >= WINDOW_SAMPLES * (deps.sampleMs ?? SAMPLE_MS) / 1000 && p.projectedYears !== null && p.projectedYears < deps.flash.warnBelowYears) {
      warned = true;
      deps.log.warn('flash wear: at the last hour\'s write rate the flash reaches its rated endurance early', {
        writtenBytesPerSecond: Math.round(p.writtenBytesPerSecond ?? 0),
        projectedYears: Math.round(p.projectedYears * 10) / 10,
        warnBelowYears: deps.flash.warnBelowYears,
        capacityBytes: deps.flash.capacityBytes,
        ratedWriteCycles: deps.flash.ratedWriteCycles,
      });
    }
  }

  return {
    writtenBytes: read,
    projection,
    sample,
    part: {
      name: 'flash-wear',
      start: async () => {
        // Not at once: start-up's writes are not the gateway's running rate (see the header).
        timer = setInterval(sample, deps.sampleMs ?? SAMPLE_MS);
        timer.unref();
      },
      stop: async () => clearInterval(timer),
    },
  };
}

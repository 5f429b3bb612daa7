// JSONata rules (docs/design.md §11): `$` is the payload, `$context` is {topic, vars, label}.
//
// Bounds, so that no expression can stall the daemon (evaluation runs on the event loop):
// - time and depth: jsonata 2's own guardrails (`timeout`, `stack` options) run at every
//   evaluation step (the entry/exit hook technique, built into jsonata since 2.0): an
//   expression that runs longer than `timeoutMs` or nests deeper than `maxDepth` (runaway
//   recursion) stops with D1012 / D1011;
// - sequence length: `maxSequence` caps every sequence built during evaluation (D2015), so
//   `[1..9999999]` cannot allocate a huge array;
// - input and output: at most `maxBytes` of JSON each.
// - regular expressions: a single regex call runs to its end before the next check, so
//   backtracking is bounded instead: patterns with backreferences or lookaround (which only a
//   backtracking engine runs) are refused, and V8 is told to switch a regex that backtracks
//   excessively to its linear-time engine (a process-wide V8 flag, set once when rules are
//   first compiled; it only changes how such a regex runs, never its result).
import v8 from 'node:v8';
import { createRequire } from 'node:module';
import type jsonataType from 'jsonata';

export interface RuleLimits {
  timeoutMs: number;
  maxDepth: number;
  maxSequence: number;
  maxBytes: number;
}

export const defaultRuleLimits: RuleLimits = { timeoutMs: 500, maxDepth: 500, maxSequence: 100_000, maxBytes: 1024 * 1024 };

export interface RuleContext {
  topic: string;
  vars: Record<string, string>;
  label: string;
}

/** Why an expression failed: it does not parse, it hit a bound, or it failed on this input. */
export class RuleError extends Error {
  constructor(
    readonly kind: 'syntax' | 'limit' | 'evaluation',
    message: string,
    readonly code?: string,
  ) {
    super(message);
    this.name = 'RuleError';
  }
}

const LIMIT_CODES = new Set(['D1011', 'D1012', 'D2014', 'D2015']);

let regexFallbackSet = false;
function enableRegexFallback(): void {
  if (regexFallbackSet) return;
  regexFallbackSet = true;
  v8.setFlagsFromString('--enable-experimental-regexp-engine-on-excessive-backtracks');
}

/** What only a backtracking engine runs: backreferences (\1, \k<name>) and lookaround. */
const BACKTRACKING_ONLY = /\\[1-9]|\\k<|\(\?<?[=!]/;

/** The RegexEngine of rules: refuses patterns that could backtrack without bound. */
class BoundedRegExp extends RegExp {
  constructor(pattern: string | RegExp, flags?: string) {
    const source = typeof pattern === 'string' ? pattern : pattern.source;
    if (BACKTRACKING_ONLY.test(source)) {
      throw new RuleError('evaluation', 'regular expressions with backreferences or lookaround are not allowed in rules');
    }
    super(pattern, flags);
  }
}

interface JsonataError {
  code?: string;
  message?: string;
  position?: number;
  token?: string;
}

function describe(err: unknown, limits: RuleLimits): RuleError {
  if (err instanceof RuleError) return err;
  let e = (typeof err === 'object' && err !== null ? err : {}) as JsonataError & { error?: unknown };
  // $eval wraps what stopped the inner expression (D3121): report the cause itself.
  if (e.code === 'D3121' && typeof e.error === 'object' && e.error !== null) {
    if (e.error instanceof RuleError) return e.error;
    e = e.error as JsonataError;
  }
  const code = typeof e.code === 'string' ? e.code : undefined;
  const text = typeof e.message === 'string' ? e.message : String(err);
  if (code === 'D1012') return new RuleError('limit', `evaluation stopped after ${limits.timeoutMs} ms (limit mapping.ruleTimeoutMs): ${text}`, code);
  if (code === 'D1011') return new RuleError('limit', `evaluation stopped at depth ${limits.maxDepth} (limit mapping.ruleMaxDepth): ${text}`, code);
  if (code !== undefined && LIMIT_CODES.has(code)) return new RuleError('limit', `evaluation stopped (limit mapping.ruleMaxSequence ${limits.maxSequence}): ${text}`, code);
  if (err instanceof RangeError) return new RuleError('limit', `evaluation stopped: ${err.message}`);
  const where = typeof e.position === 'number' ? ` (position ${e.position})` : '';
  if (code !== undefined && code.startsWith('S')) return new RuleError('syntax', `${text}${where}`, code);
  return new RuleError('evaluation', `${text}${where}`, code);
}

export interface CompiledRule {
  readonly source: string;
  /** Evaluates on `input`; undefined when the expression yields nothing. Throws RuleError. */
  evaluate(input: unknown, context?: RuleContext): Promise<unknown>;
}

/** Whether arrays and objects nest deeper than `max` in `value` (without recursion). */
function nestedDeeperThan(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth >= max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
  }
  return false;
}

function jsonSize(value: unknown): number {
  if (value === undefined) return 0;
  const text = JSON.stringify(value);
  return text === undefined ? 0 : Buffer.byteLength(text, 'utf8');
}

// jsonata is loaded by the first rule compiled: a gateway without rules keeps its memory.
const requireCjs = createRequire(import.meta.url);
let jsonataModule: typeof jsonataType | undefined;
const jsonata = (...args: Parameters<typeof jsonataType>) => (jsonataModule ??= requireCjs('jsonata') as typeof jsonataType)(...args);

/** Compiles an expression (throws RuleError 'syntax'). */
export function compileRule(source: string, limits: RuleLimits = defaultRuleLimits): CompiledRule {
  enableRegexFallback();
  let expr: jsonataType.Expression;
  try {
    expr = jsonata(source, { timeout: limits.timeoutMs, stack: limits.maxDepth, sequence: limits.maxSequence, RegexEngine: BoundedRegExp as unknown as RegExpConstructor });
  } catch (err) {
    const d = describe(err, limits);
    throw new RuleError('syntax', d.message, d.code);
  }
  return {
    source,
    async evaluate(input, context) {
      // Before its size: JSON.stringify (and jsonata's lookups) recurse, and 10,000 nested
      // arrays ended in a RangeError outside any bound (found by the REST fuzz pass).
      if (nestedDeeperThan(input, limits.maxDepth)) throw new RuleError('limit', `input nested deeper than ${limits.maxDepth} levels (limit mapping.ruleMaxDepth)`);
      if (jsonSize(input) > limits.maxBytes) throw new RuleError('limit', `input larger than ${limits.maxBytes} bytes (limit mapping.ruleMaxBytes)`);
      let out: unknown;
      try {
        out = await expr.evaluate(input, context ? { context } : undefined);
      } catch (err) {
        throw describe(err, limits);
      }
      let size: number;
      try {
        size = jsonSize(out);
      } catch (err) {
        throw new RuleError('evaluation', `result is not JSON: ${(err as Error).message}`);
      }
      if (size > limits.maxBytes) throw new RuleError('limit', `output larger than ${limits.maxBytes} bytes (limit mapping.ruleMaxBytes)`);
      return normalize(out);
    },
  };
}

/** jsonata sequences are arrays with extra flags, functions are not JSON: make the value plain JSON. */
function normalize(value: unknown): unknown {
  if (value === undefined) return undefined;
  if (typeof value === 'function') return undefined;
  return JSON.parse(JSON.stringify(value)) as unknown;
}

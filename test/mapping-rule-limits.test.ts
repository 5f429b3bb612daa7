// What a runaway rule is told (src/mapping/rules.ts): each limit that stops an evaluation names
// its configuration key. Depth and time are both counted by jsonata (its evaluation is async: a
// recursion never runs out of the JavaScript stack), and whichever is reached first stops it.
import { expect } from 'chai';
import { compileRule, defaultRuleLimits, RuleError, type RuleLimits } from '../src/mapping/rules.js';

async function failureOf(source: string, limits: RuleLimits): Promise<RuleError> {
  const err = await compileRule(source, limits)
    .evaluate({})
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  expect(err).to.be.instanceOf(RuleError);
  return err as RuleError;
}

describe('rule limits named in what stops an evaluation', () => {
  it('a recursion stopped at maxDepth names mapping.ruleMaxDepth', async () => {
    const err = await failureOf('($f := function($n){ 1 + $f($n + 1) }; $f(0))', { ...defaultRuleLimits, maxDepth: 50, timeoutMs: 60_000 });
    expect(err.message).to.match(/depth 50 \(limit mapping\.ruleMaxDepth\)/);
  });

  it('a recursion without end stopped by the time limit names mapping.ruleTimeoutMs', async () => {
    const err = await failureOf('($f := function($n){ $f($n + 1) }; $f(0))', { ...defaultRuleLimits, timeoutMs: 100, maxDepth: 1_000_000 });
    expect(err.message).to.match(/after 100 ms \(limit mapping\.ruleTimeoutMs\)/);
  });
});

import type { PasswordPolicy } from '../config/index.js';
import { PolicyViolationError } from '../errors/errors.js';

const count = (s: string, re: RegExp) => (s.match(re) ?? []).length;

/** Throws 422 naming the first rule the password breaks; zero disables a rule. */
export function checkPasswordPolicy(policy: PasswordPolicy, password: string): void {
  const chars = [...password];
  const rules: [keyof PasswordPolicy, number, string][] = [
    ['min', chars.length, 'characters'],
    ['lower', count(password, /\p{Ll}/gu), 'lower-case letters'],
    ['upper', count(password, /\p{Lu}/gu), 'upper-case letters'],
    ['numeric', count(password, /\p{Nd}/gu), 'digits'],
    ['symbol', count(password, /[\p{P}\p{S}]/gu), 'symbol or punctuation characters'],
  ];
  for (const [rule, have, what] of rules) {
    if (policy[rule] > 0 && have < policy[rule]) {
      throw new PolicyViolationError(`password breaks the password policy rule "${rule}": at least ${policy[rule]} ${what} required`);
    }
  }
}

export function checkUsernamePolicy(policy: { min: number }, username: string): void {
  if (policy.min > 0 && [...username].length < policy.min) {
    throw new PolicyViolationError(`username breaks the username policy rule "min": at least ${policy.min} characters required`);
  }
}

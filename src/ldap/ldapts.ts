import { createRequire } from 'node:module';
import type * as Ldapts from 'ldapts';

// ldapts is loaded by the first LDAP sign-in: a gateway without a directory keeps the memory.
const requireCjs = createRequire(import.meta.url);
let loaded: typeof Ldapts | undefined;
export const ldapts = (): typeof Ldapts => (loaded ??= requireCjs('ldapts') as typeof Ldapts);

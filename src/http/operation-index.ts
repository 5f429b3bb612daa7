// Finds the contract operation of a request before validation, so authentication can run
// first: an anonymous caller gets 401, not a schema error that describes the API.
import type { OperationPlan } from './openapi-operations.js';

export type OperationMatch =
  | { operation: OperationPlan; key: string; rawParams: string[] }
  /** The path is the document's, the method is not: the methods it has. */
  | { allowed: string[] };

export interface OperationIndex {
  /** "METHOD /api/template/{id}" of the request, or undefined for a path the contract lacks. */
  find(method: string, path: string): string | undefined;
  /** The operation and its raw (still encoded) path parameter values; undefined for a path the contract lacks. */
  match(method: string, path: string): OperationMatch | undefined;
}

export function createOperationIndex(operations: readonly OperationPlan[]): OperationIndex {
  const byTemplate = new Map<string, Map<string, OperationPlan>>();
  for (const op of operations) {
    if (!byTemplate.has(op.template)) byTemplate.set(op.template, new Map());
    byTemplate.get(op.template)!.set(op.method, op);
  }
  const entries = [...byTemplate]
    .map(([template, methods]) => {
      const segments = template.split('/');
      return {
        methods,
        regex: new RegExp('^' + segments.map((s) => (/^\{[^}]+\}$/.test(s) ? '([^/]+)' : s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('/') + '$'),
        params: segments.filter((s) => s.startsWith('{')).length,
      };
    })
    // Literal segments win over parameters: /api/users/ids before /api/users/{id}.
    .sort((a, b) => a.params - b.params);

  function match(method: string, path: string): OperationMatch | undefined {
    const m = method === 'HEAD' ? 'GET' : method;
    let allowed: string[] | undefined;
    for (const entry of entries) {
      const found = entry.regex.exec(path);
      if (!found) continue;
      const operation = entry.methods.get(m);
      if (operation) return { operation, key: `${m} ${operation.template}`, rawParams: found.slice(1) };
      allowed ??= [...entry.methods.keys()];
    }
    return allowed ? { allowed } : undefined;
  }
  return {
    match,
    find(method, path) {
      const found = match(method, path);
      return found && 'key' in found ? found.key : undefined;
    },
  };
}

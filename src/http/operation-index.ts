// Finds the contract operation of a request before validation, so authentication can run
// first: an anonymous caller gets 401, not a schema error that describes the API.

export interface OperationIndex {
  /** "METHOD /api/template/{id}" of the request, or undefined for a path the contract lacks. */
  find(method: string, path: string): string | undefined;
}

export function createOperationIndex(paths: Record<string, Record<string, unknown>>): OperationIndex {
  const entries = Object.entries(paths)
    .map(([template, item]) => {
      const segments = template.split('/');
      return {
        template,
        methods: new Set(Object.keys(item).map((m) => m.toUpperCase())),
        regex: new RegExp('^' + segments.map((s) => (/^\{[^}]+\}$/.test(s) ? '[^/]+' : s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('/') + '$'),
        params: segments.filter((s) => s.startsWith('{')).length,
      };
    })
    // Literal segments win over parameters: /api/users/ids before /api/users/{id}.
    .sort((a, b) => a.params - b.params);
  return {
    find(method, path) {
      const m = method === 'HEAD' ? 'GET' : method;
      const entry = entries.find((e) => e.regex.test(path) && e.methods.has(m));
      return entry ? `${m} ${entry.template}` : undefined;
    },
  };
}

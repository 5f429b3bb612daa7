// Query values after OpenAPI validation. Express 5's req.query is read-only, so the
// validator's type coercion may not be visible there: convert the validated strings here.

type QueryValue = unknown;

export function queryInt(v: QueryValue, fallback: number): number {
  if (v === undefined) return fallback;
  const n = Number(Array.isArray(v) ? v[0] : v);
  return Number.isInteger(n) ? n : fallback;
}

export function queryBool(v: QueryValue): boolean | undefined {
  if (v === undefined) return undefined;
  const s = String(Array.isArray(v) ? v[0] : v);
  return s === 'true' ? true : s === 'false' ? false : undefined;
}

export function queryStrings(v: QueryValue): string[] | undefined {
  if (v === undefined) return undefined;
  return (Array.isArray(v) ? v : [v]).map(String);
}

export function queryString(v: QueryValue): string | undefined {
  if (v === undefined) return undefined;
  return String(Array.isArray(v) ? v[0] : v);
}

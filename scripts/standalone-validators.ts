// Compiles JSON schemas into standalone validator code at build time (Ajv's standalone mode), so
// that the daemon loads ready validators instead of compiling schemas at every start
// (docs/footprint.md). The output is a CommonJS module (Ajv's runtime helpers are CommonJS),
// loaded with createRequire next to the module that uses it.
import { writeFileSync } from 'node:fs';
import type { AnySchema } from 'ajv';
import standalone from 'ajv/dist/standalone/index.js';

// A CommonJS module whose default export TypeScript sees as the namespace.
const standaloneCode = (standalone as unknown as { default: (ajv: never, refs: Record<string, string>) => string }).default;

/** The end of the JSON literal that starts at `from` (Ajv writes schemas with JSON.stringify). */
function endOfJson(code: string, from: number): number {
  let depth = 0;
  for (let i = from; i < code.length; i++) {
    const c = code[i];
    if (c === '"') {
      for (i++; code[i] !== '"'; i++) if (code[i] === '\\') i++;
    } else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') {
      if (--depth === 0) return i + 1;
    }
  }
  throw new Error('unterminated schema literal in the standalone code');
}

/**
 * Ajv's standalone code declares every schema as a constant (`const schema12 = {...};`) though
 * it reads few of them: the others would be built on the heap at load for nothing.
 */
function withoutUnusedSchemaConstants(code: string): string {
  let out = code;
  for (const m of [...code.matchAll(/const (schema\d+) = /g)].reverse()) {
    const name = m[1]!;
    if ((out.match(new RegExp(`\\b${name}\\b`, 'g')) ?? []).length > 1) continue;
    const start = m.index!;
    const end = endOfJson(out, start + m[0].length);
    if (out[end] !== ';') throw new Error(`unexpected standalone code after ${name}`);
    out = out.slice(0, start) + out.slice(end + 1);
  }
  return out;
}

interface AjvForStandalone {
  addSchema(schema: AnySchema, key: string): unknown;
}

/**
 * Writes `file`: one export per entry of `schemas` (its key: a JavaScript identifier), plus
 * `extra` as JSON exports. `shared` is registered first under its key (schemas `$ref` into it).
 */
export function writeStandaloneValidators(file: string, ajv: AjvForStandalone, schemas: Record<string, AnySchema>, options: { shared?: { key: string; schema: AnySchema }; extra?: Record<string, unknown> } = {}): number {
  if (options.shared) ajv.addSchema(options.shared.schema, options.shared.key);
  const exportsByName: Record<string, string> = {};
  for (const [name, schema] of Object.entries(schemas)) {
    if (!/^[A-Za-z_$][\w$]*$/.test(name)) throw new Error(`validator name ${name} is not an identifier`);
    ajv.addSchema(schema, name);
    exportsByName[name] = name;
  }
  let code = withoutUnusedSchemaConstants(standaloneCode(ajv as never, exportsByName));
  for (const [name, value] of Object.entries(options.extra ?? {})) code += `\nexports.${name} = ${JSON.stringify(value)};`;
  writeFileSync(file, `// Written by npm run build (scripts/standalone-validators.ts): do not edit.\n${code}\n`);
  return code.length;
}

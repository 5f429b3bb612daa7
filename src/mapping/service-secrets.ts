// Passwords in service files never leave through the API (docs/bridges.md "Credentials", docs/security.md):
// GET /api/services/{id} answers the file with each password of a Bridge (remote.password), a
// Connection (configuration.password) or a Sparkplug edge node's upstream broker (via.password)
// replaced by REDACTED, and when it is a `!ref` to a
// parameter, that parameter's default. A file sent back (PUT, validate) with REDACTED at such a
// place keeps the password the file on disk has there, so a read-edit-write round trip works.
import type { Document, Scalar } from 'yaml';
import { BadRequestError } from '../errors/errors.js';
import { parseServiceDocument, refName, yaml } from './service-files.js';

export const REDACTED = '********';

/** Where each resource type keeps a password, below the resource. */
const SECRET_PATHS: Record<string, string[]> = {
  Bridge: ['properties', 'remote', 'password'],
  Connection: ['properties', 'configuration', 'password'],
  Sparkplug: ['properties', 'via', 'password'],
};

interface SecretPlace {
  /** Where it is named, for messages (resources.<name>.properties...). */
  path: string;
  /** The scalar holding the secret: the value itself, or the default of the parameter it refers to. */
  node: Scalar;
}

/** Every password of the document, with the scalar that holds its value. */
function secretPlaces(doc: Document): SecretPlace[] {
  const { isMap, isScalar } = yaml();
  const out: SecretPlace[] = [];
  const resources = doc.get('resources');
  if (!isMap(resources)) return out;
  for (const pair of resources.items) {
    const r = pair.value;
    if (!isMap(r)) continue;
    const path = SECRET_PATHS[String(r.get('type'))];
    if (!path) continue;
    const node = r.getIn(path, true);
    if (!isScalar(node)) continue;
    const where = `resources.${String(isScalar(pair.key) ? pair.key.value : pair.key)}.${path.join('.')}`;
    const ref = refName(node.value);
    if (ref === undefined) {
      if (typeof node.value === 'string') out.push({ path: where, node });
      continue;
    }
    const def = doc.getIn(['parameters', ref, 'default'], true);
    if (isScalar(def) && typeof def.value === 'string') out.push({ path: where, node: def });
  }
  return out;
}

/** The file's text with every password replaced by REDACTED (the text unchanged when it has none, or is not valid YAML). */
export function redactSecrets(text: string): string {
  const doc = parseServiceDocument(text);
  if (doc.errors.length) return text;
  const places = secretPlaces(doc).filter((p) => p.node.value !== REDACTED);
  if (!places.length) return text;
  for (const p of places) p.node.value = REDACTED;
  return doc.toString();
}

/**
 * `text` as sent, with each REDACTED password replaced by the password the file on disk
 * (`current`) has at the same place; 400 when it has none there.
 */
export function restoreSecrets(text: string, current: string | undefined): string {
  const doc = parseServiceDocument(text);
  if (doc.errors.length) return text;
  const redacted = secretPlaces(doc).filter((p) => p.node.value === REDACTED);
  if (!redacted.length) return text;
  const before = new Map<string, string>();
  if (current !== undefined) {
    const old = parseServiceDocument(current);
    if (!old.errors.length) for (const p of secretPlaces(old)) before.set(p.path, String(p.node.value));
  }
  for (const p of redacted) {
    const value = before.get(p.path);
    if (value === undefined || value === REDACTED) throw new BadRequestError(`${p.path}: "${REDACTED}" stands for the password the service file has there, and it has none: send the password`);
    p.node.value = value;
  }
  return doc.toString();
}

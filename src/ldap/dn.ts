// Distinguished names and search filters, as the LDAP part needs them: DNs are compared in a
// normalised form (RFC 4514 string form, case-insensitive), and configured filter templates are
// filled with values escaped per RFC 4515, never by plain concatenation.
import { ldapts } from './ldapts.js';

/** Splits on `sep` characters that are not escaped with a backslash. */
function splitUnescaped(text: string, seps: string): string[] {
  const parts: string[] = [];
  let current = '';
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (ch === '\\' && i + 1 < text.length) {
      current += ch + text[i + 1];
      i++;
    } else if (seps.includes(ch)) {
      parts.push(current);
      current = '';
    } else {
      current += ch;
    }
  }
  parts.push(current);
  return parts;
}

/** An attribute value in RFC 4514 string form → its characters (escapes resolved, UTF-8 aware). */
function unescapeValue(raw: string): string {
  const bytes: number[] = [];
  const pushText = (s: string) => bytes.push(...Buffer.from(s, 'utf8'));
  for (let i = 0; i < raw.length; i++) {
    const ch = raw[i]!;
    if (ch === '\\' && i + 1 < raw.length) {
      const hex = raw.slice(i + 1, i + 3);
      if (/^[0-9a-fA-F]{2}$/.test(hex)) {
        bytes.push(parseInt(hex, 16));
        i += 2;
      } else {
        pushText(raw[i + 1]!);
        i++;
      }
    } else {
      pushText(ch);
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

/** One canonical escaping of a value: the RFC 4514 specials, leading `#`/space, trailing space. */
function escapeValue(value: string): string {
  let out = '';
  for (let i = 0; i < value.length; i++) {
    const ch = value[i]!;
    const special = ',+"\\<>;='.includes(ch) || (i === 0 && (ch === '#' || ch === ' ')) || (i === value.length - 1 && ch === ' ');
    if (ch === '\0') out += '\\00';
    else out += special ? `\\${ch}` : ch;
  }
  return out;
}

/** Trims spaces that are not escaped (a trailing `\ ` is part of the value). */
function trimUnescaped(raw: string): string {
  let start = 0;
  while (start < raw.length && raw[start] === ' ') start++;
  let end = raw.length;
  while (end > start && raw[end - 1] === ' ') {
    let backslashes = 0;
    for (let j = end - 2; j >= start && raw[j] === '\\'; j--) backslashes++;
    if (backslashes % 2 === 1) break; // escaped space
    end--;
  }
  return raw.slice(start, end);
}

/**
 * A DN in a normalised form for comparison: attribute types and values lower-cased, spaces
 * around separators dropped, escapes made canonical (`\2C` and `\,` compare equal),
 * multi-valued RDNs sorted. `cn=Operators, ou=Groups,dc=Example,dc=org` and
 * `CN=operators,OU=groups,DC=example,DC=org` normalise alike. Values are compared
 * case-insensitively, as the usual naming attributes (cn, ou, dc, uid) are.
 */
export function normalizeDn(dn: string): string {
  const trimmed = dn.trim();
  if (!trimmed) return '';
  return splitUnescaped(trimmed, ',;')
    .map((rdn) =>
      splitUnescaped(rdn, '+')
        .map((ava) => {
          const eq = ava.indexOf('=');
          if (eq < 0) return trimUnescaped(ava).toLowerCase();
          const type = ava.slice(0, eq).trim().toLowerCase();
          const rawValue = trimUnescaped(ava.slice(eq + 1).trimStart());
          // A #-hex value (BER) stays as written, lower-cased.
          const value = rawValue.startsWith('#') ? rawValue.toLowerCase() : escapeValue(unescapeValue(rawValue).toLowerCase());
          return `${type}=${value}`;
        })
        .sort()
        .join('+'),
    )
    .join(',');
}

/** Whether two DNs name the same entry (normalised, case-insensitive). */
export function sameDn(a: string, b: string): boolean {
  return normalizeDn(a) === normalizeDn(b);
}

/**
 * Fills `{{name}}` placeholders of a configured filter with values escaped per RFC 4515
 * (`*`, `(`, `)`, `\` and NUL become `\2a`, `\28`, `\29`, `\5c`, `\00`), so a value can only
 * ever be matched literally. Unknown placeholders are left as they are.
 */
export function fillFilter(template: string, values: Record<string, string>): string {
  return template.replace(/\{\{\s*(\w+)\s*\}\}/g, (whole, name: string) => (name in values ? ldapts().Filter.escape(values[name]!) : whole));
}

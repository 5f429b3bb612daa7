// Editing permissions {context, resource, operation}, with a plain-words hint of what the
// resource (an MQTT topic filter or a URL path, docs/design.md §4) matches.
import { Button, SelectField, TextField } from './forms.js';
import type { Context, Operation, PermissionInput } from '../types.js';

export const operations: { value: Operation; label: string }[] = [
  { value: 'read', label: 'read' },
  { value: 'write', label: 'write' },
  { value: 'readWrite', label: 'read and write' },
];
export const contexts: { value: Context; label: string }[] = [
  { value: 'mqtt', label: 'MQTT topic' },
  { value: 'http', label: 'HTTP path' },
];

/** What a resource pattern matches, or why it is not a valid pattern. */
export function describeResource(resource: string, context: Context): { text: string; invalid?: string } {
  if (!resource) return { text: context === 'mqtt' ? 'An MQTT topic filter, e.g. plant/+/temperature or plant/#.' : 'A URL path, e.g. /api/users/# or /api/connections.' };
  if (context === 'http' && !resource.startsWith('/')) return { text: '', invalid: 'An HTTP path starts with /.' };
  const levels = resource.split('/');
  for (let i = 0; i < levels.length; i++) {
    const l = levels[i]!;
    if (l.includes('#') && (l !== '#' || i !== levels.length - 1)) return { text: '', invalid: '# must be a whole level and the last one.' };
    if (l.includes('+') && l !== '+') return { text: '', invalid: '+ must be a whole level.' };
  }
  const what = context === 'mqtt' ? 'topics' : 'paths';
  const last = levels[levels.length - 1];
  const fixed = (last === '#' ? levels.slice(0, -1) : levels).map((l) => (l === '+' ? '‹any one level›' : l)).join('/');
  let text: string;
  if (resource === '#') text = `Matches all ${what}${context === 'mqtt' ? ' (except $SYS topics)' : ''}.`;
  else if (last === '#') text = `Matches ${fixed || '/'} and every ${context === 'mqtt' ? 'topic' : 'path'} below it.`;
  else if (levels.includes('+')) text = `Matches ${what} of the form ${fixed}.`;
  else text = `Matches exactly ${resource}.`;
  if (context === 'http') text += ' GET needs read; POST, PUT and DELETE need write.';
  else text += ' Subscribing needs read, publishing needs write.';
  return { text };
}

export function PermissionFields(props: { value: PermissionInput; onChange: (p: PermissionInput) => void; index?: number; lockContext?: boolean }) {
  const p = props.value;
  const described = describeResource(p.resource, p.context);
  const n = props.index !== undefined ? ` ${props.index + 1}` : '';
  return (
    <div class="permission-fields">
      <SelectField label={`Context${n}`} value={p.context} options={contexts} disabled={props.lockContext} onValue={(context) => props.onChange({ ...p, context })} />
      <TextField
        label={`Resource${n}`}
        class="grow"
        value={p.resource}
        required
        maxLength={65535}
        hint={described.text || undefined}
        invalid={described.invalid}
        onValue={(resource) => props.onChange({ ...p, resource })}
      />
      <SelectField label={`Operation${n}`} value={p.operation} options={operations} onValue={(operation) => props.onChange({ ...p, operation })} />
    </div>
  );
}

/** A list of permissions being edited (direct permissions of a user, a new role's permissions). */
export function PermissionEditor(props: { value: PermissionInput[]; onChange: (value: PermissionInput[]) => void; legend: string }) {
  const list = props.value;
  return (
    <fieldset class="permissions">
      <legend>{props.legend}</legend>
      {list.length === 0 && <p class="hint">No permissions.</p>}
      {list.map((p, i) => (
        <div class="permission-row" key={i}>
          <PermissionFields index={i} value={p} onChange={(next) => props.onChange(list.map((q, j) => (j === i ? next : q)))} />
          <Button variant="plain" aria-label={`Remove permission ${i + 1}`} onClick={() => props.onChange(list.filter((_, j) => j !== i))}>
            Remove
          </Button>
        </div>
      ))}
      <Button onClick={() => props.onChange([...list, { context: 'mqtt', resource: '', operation: 'read' }])}>Add permission</Button>
    </fieldset>
  );
}

export function permissionText(p: PermissionInput): string {
  return `${p.context} ${p.operation} ${p.resource}`;
}

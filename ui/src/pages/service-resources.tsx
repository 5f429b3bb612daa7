// The resources of a service in the editor: each a folding panel whose summary says what it is
// (name, type, "Modbus · 127.0.0.1:502") and whose body is the form its type's JSON Schema gives
// (schema-form.tsx), with "Remove resource" at its foot, away from the editor's Apply; and the
// row that adds a resource. Panels of an existing service start folded, so a service of several
// resources fits a screen; a new resource, or one with a problem, opens.
import { useState } from 'preact/hooks';
import { Button, SelectField, TextField } from '../components/forms.js';
import { resourceSummary } from '../components/resource-text.js';
import { ObjectFields, fieldId, type FormContext } from '../components/schema-form.js';
import type { JsonSchema, ResourceType } from '../types.js';

const RESOURCE_NAME = /^[A-Za-z][A-Za-z0-9_-]*$/;

export function AddResource(props: { types: ResourceType[]; existing: string[]; onAdd: (name: string, type: ResourceType) => void }) {
  const [type, setType] = useState(props.types[0]?.type ?? '');
  const [name, setName] = useState('');
  const [touched, setTouched] = useState(false);
  const invalid = !RESOURCE_NAME.test(name) ? 'A letter, then letters, digits, _ or -.' : props.existing.includes(name) ? 'This service has a resource of that name.' : undefined;
  return (
    <form
      class="inline add-resource"
      aria-label="Add a resource"
      onSubmit={(e) => {
        e.preventDefault();
        setTouched(true);
        const t = props.types.find((x) => x.type === type);
        if (invalid || !t) return;
        props.onAdd(name, t);
        setName('');
        setTouched(false);
      }}
    >
      <SelectField label="Type of the new resource" value={type} onValue={setType} options={props.types.map((t) => t.type)} />
      <TextField label="Name of the new resource" value={name} onValue={setName} maxLength={128} invalid={touched ? invalid : undefined} />
      <Button type="submit">Add resource</Button>
    </form>
  );
}

export function ResourcePanel(props: {
  name: string;
  type: string;
  schema: JsonSchema | undefined;
  properties: Record<string, unknown>;
  ctx: Omit<FormContext, 'root'>;
  open: boolean;
  onToggle: (open: boolean) => void;
  onChange: (p: Record<string, unknown>) => void;
  onRemove?: () => void;
}) {
  const base = `resources.${props.name}`;
  const own = ['', '.type', '.properties'].flatMap((s) => props.ctx.problems.get(`${base}${s}`) ?? []);
  const titleId = `${fieldId(base)}-title`;
  const summary = resourceSummary(props.type, props.properties);
  return (
    <details
      class="panel resource"
      id={fieldId(base)}
      data-resource-name={props.name}
      open={props.open}
      onToggle={(e) => {
        const open = (e.currentTarget as HTMLDetailsElement).open;
        if (open !== props.open) props.onToggle(open);
      }}
    >
      <summary>
        <h3 id={titleId}>
          {props.name} <span class="badge off">{props.type}</span>
        </h3>
        {summary && <span class="hint">{summary}</span>}
      </summary>
      {own.map((m, i) => (
        <p class="invalid" key={i}>
          {m}
        </p>
      ))}
      {props.schema ? (
        <ObjectFields schema={props.schema} value={props.properties} path={`${base}.properties`} ctx={{ ...props.ctx, root: props.schema }} onChange={props.onChange} />
      ) : (
        <p class="hint">The gateway knows no resource type {props.type}: edit it in the YAML tab.</p>
      )}
      {props.onRemove && (
        <div class="panel-foot">
          <Button class="small danger-outline" onClick={props.onRemove} aria-label={`Remove resource ${props.name}`}>
            Remove resource
          </Button>
        </div>
      )}
    </details>
  );
}

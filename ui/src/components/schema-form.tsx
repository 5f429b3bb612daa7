// A form built from a JSON Schema (the schemas GET /api/resource-types answers): every property
// of the schema becomes a control labelled with its `title` (else its name in words: pollIntervalMs
// → "Poll interval (ms)") — text, number, choice, yes/no, nested groups, lists of items, key/value
// maps — with its description as hint, its default as placeholder, and the problems the API
// reported for its path marked at it. Fields sit in a grid; a resource's fields that do not apply
// (FormHints.fieldRules) are left out and the rarely changed ones folded under "More settings". Nothing here knows a resource type: what
// a schema cannot say (which resource a `!ref` names, which definition an untyped object takes)
// comes from FormHints (service-form-hints.ts), so new types (bridges, Sparkplug) get a form
// from their schema alone.
import type { ComponentChildren, InputHTMLAttributes } from 'preact';
import { useState } from 'preact/hooks';
import { Button } from './forms.js';
import type { JsonSchema } from '../types.js';

export type Json = unknown;
type Obj = Record<string, Json>;

export interface ResourceRef {
  name: string;
  type: string;
  properties: Obj;
}

/** Which of a resource's own properties the form shows, and where. */
export interface FieldRule {
  /** Properties that do not apply, given the resource's other properties and the service's resources (shown anyway while set). */
  hidden?: (value: Obj, resources: ResourceRef[]) => string[];
  /** Properties folded under "More settings" (open while one of them is set or has a problem). */
  folded?: string[];
}

export interface FormHints {
  /** The resource type a `!ref` property names, by property name (`connection` → Connection). */
  refTypes?: Record<string, string>;
  /** Labels of schema definitions by the schema's title (Connection: Modbus → Modbus TCP). */
  definitionLabels?: Record<string, Record<string, string>>;
  /** By resource type (the schema's title); `*` for every type. */
  fieldRules?: Record<string, FieldRule>;
}

export interface FormContext {
  /** Problems by path (resources.x.properties.a.b or …items[0].c). */
  problems: Map<string, string[]>;
  /** The resources of the service (the choices of a `!ref`). */
  resources: ResourceRef[];
  /** The schema of the resource type (its definitions). */
  root: JsonSchema;
  hints: FormHints;
}

const ACRONYMS: Record<string, string> = { id: 'ID', ids: 'IDs', url: 'URL', urls: 'URLs', qos: 'QoS', db: 'DB', ca: 'CA', mqtt: 'MQTT', http: 'HTTP', tls: 'TLS', ip: 'IP', opc: 'OPC', ua: 'UA' };

/** A property's label: its schema title, else its name in words (pollIntervalMs → "Poll interval (ms)"). */
export function labelOf(name: string, schema: JsonSchema): string {
  if (schema.title) return schema.title;
  const words = name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .split(/[\s_-]+/)
    .filter(Boolean)
    .map((w) => w.toLowerCase());
  const unit = words.length > 1 && (words[words.length - 1] === 'ms' || words[words.length - 1] === 'seconds') ? (words.pop() === 'ms' ? ' (ms)' : ' (s)') : '';
  return words.map((w, i) => ACRONYMS[w] ?? (i === 0 ? w.charAt(0).toUpperCase() + w.slice(1) : w)).join(' ') + unit;
}

/** "Kind of connection settings": a label inside a sentence (acronyms and words such as QoS keep their case). */
export const inSentence = (label: string) => (/^[A-Z]\S*[A-Z]/.test(label.split(' ')[0]!) ? label : label.charAt(0).toLowerCase() + label.slice(1));

/** A DOM id for a path (the problem summary links to it). */
export function fieldId(path: string): string {
  return `f-${path.replace(/[^A-Za-z0-9_-]/g, '_')}`;
}

const isObj = (v: Json): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);
const isTagValue = (v: Json): v is { '!ref': string } | { '!sub': string } => isObj(v) && Object.keys(v).length === 1 && (typeof v['!ref'] === 'string' || typeof v['!sub'] === 'string');
const tagText = (v: Json) => (isTagValue(v) ? ('!ref' in v ? `!ref ${v['!ref'] as string}` : `!sub ${v['!sub'] as string}`) : undefined);

/** Text typed into a field: `!ref x` / `!sub t` are tags (a parameter), numbers parse for number fields, empty is unset. */
function parseText(text: string, numeric: boolean): Json {
  if (text === '') return undefined;
  const tag = /^!(ref|sub)\s+([\s\S]*)$/.exec(text);
  if (tag) return { [`!${tag[1]}`]: tag[2] };
  if (numeric && /^-?\d+(\.\d+)?$/.test(text.trim())) return Number(text.trim());
  return text;
}

/** The minimal value of a new resource of a schema: required enums their first value, required objects their own minimum. */
export function skeleton(schema: JsonSchema): Obj {
  const out: Obj = {};
  for (const key of schema.required ?? []) {
    const p = schema.properties?.[key];
    if (!p) continue;
    if (p.enum) out[key] = p.enum[0];
    else if (p.type === 'object') out[key] = p.properties ? skeleton(p) : {};
    else if (p.type === 'array') out[key] = [];
  }
  return out;
}

/**
 * The properties of a resource added to a service: its schema's skeleton, and each required
 * `!ref` that only one resource of the service can fill set to that one (a new endpoint of a
 * service with one connection is on that connection).
 */
export function newResource(schema: JsonSchema, ctx: Pick<FormContext, 'resources' | 'hints'>): Obj {
  const out = skeleton(schema);
  const full = { ...ctx, problems: new Map<string, string[]>(), root: schema };
  for (const key of schema.required ?? []) {
    const p = schema.properties?.[key];
    const type = p && out[key] === undefined ? refTypeOf(key, p, full) : undefined;
    if (type === undefined) continue;
    const fitting = ctx.resources.filter((r) => type === null || r.type === type);
    if (fitting.length === 1) out[key] = { '!ref': fitting[0]!.name };
  }
  return out;
}

/** A string property whose value names another resource of the service (`!ref <name>`). */
function refTypeOf(name: string, schema: JsonSchema, ctx: FormContext): string | null | undefined {
  if (ctx.hints.refTypes?.[name] !== undefined) return ctx.hints.refTypes[name];
  // Any resource, when the schema says it is a reference but no hint names the type.
  return schema.type === 'string' && /!ref\b/.test(schema.description ?? '') ? null : undefined;
}

/**
 * The definitions an untyped object property can take: those named after the value of a
 * sibling property that chooses among them (protocol: Modbus → Modbus, ModbusRtu), or after the
 * same property of the resource a sibling `!ref` names (an endpoint's address follows its
 * connection's protocol). Empty when nothing chooses: then every definition is offered.
 */
function variantKey(siblings: Obj, schema: JsonSchema, ctx: FormContext): { by?: string; value?: string; unresolved?: boolean } {
  const names = Object.keys(ctx.root.definitions ?? {});
  const chooses = (p: JsonSchema | undefined) => !!p?.enum && p.enum.some((e) => names.includes(String(e)));
  for (const [key, p] of Object.entries(schema.properties ?? {})) {
    if (chooses(p)) return { by: key, value: siblings[key] === undefined ? undefined : String(siblings[key]) };
  }
  for (const [key, p] of Object.entries(schema.properties ?? {})) {
    if (refTypeOf(key, p, ctx) === undefined) continue;
    const target = siblings[key];
    const name = isObj(target) && typeof target['!ref'] === 'string' ? target['!ref'] : undefined;
    const resource = ctx.resources.find((r) => r.name === name);
    // Nothing chosen yet (or a resource the service lacks): nothing says which definition applies.
    if (!resource) return { by: key, unresolved: true };
    const value = Object.values(resource.properties).find((v) => typeof v === 'string' && names.includes(v));
    return { by: key, value: value as string | undefined };
  }
  return {};
}

function candidates(ctx: FormContext, value: string | undefined): string[] {
  const names = Object.keys(ctx.root.definitions ?? {});
  if (value === undefined) return names;
  const fitting = names.filter((n) => n === value || n.startsWith(value));
  return fitting.length ? fitting : names;
}

/** The definition a value follows: one whose required properties it has, else the one picked, else the first. */
function chosenDefinition(options: string[], value: Json, ctx: FormContext, picked: string | undefined): string | undefined {
  const v = isObj(value) ? value : {};
  const full = options.filter((n) => {
    const required = ctx.root.definitions![n]!.required ?? [];
    return required.length > 0 && required.every((k) => k in v);
  });
  return full[0] ?? (picked && options.includes(picked) ? picked : options[0]);
}

function Problems(props: { path: string; ctx: FormContext; id?: string }) {
  const list = props.ctx.problems.get(props.path);
  if (!list?.length) return null;
  return (
    <>
      {list.map((m, i) => (
        <p class="invalid" key={i} id={i === 0 ? props.id : undefined}>
          {m}
        </p>
      ))}
    </>
  );
}

interface FieldProps {
  name: string;
  /** Shown instead of the name (labelOf by default). */
  label?: string;
  schema: JsonSchema;
  value: Json;
  required: boolean;
  path: string;
  ctx: FormContext;
  onChange: (value: Json) => void;
  /** The object this property belongs to, and its schema (choices of sibling-dependent definitions). */
  siblings: Obj;
  parent: JsonSchema;
}

const labelFor = (props: FieldProps) => props.label ?? labelOf(props.name, props.schema);

function Label(props: { for: string; name: string; required: boolean }) {
  return (
    <label for={props.for}>
      {props.name}
      {props.required ? <span class="required"> (required)</span> : null}
    </label>
  );
}

/** Label, control, hint and problems of one scalar property (`wide`: the whole row of the grid). */
function Scalar(props: FieldProps & { wide?: boolean; children: (a: { id: string; describedBy?: string; invalid: boolean }) => ComponentChildren }) {
  const id = fieldId(props.path);
  const problems = props.ctx.problems.get(props.path);
  const hint = props.schema.description;
  const describedBy = [hint ? `${id}-hint` : '', problems?.length ? `${id}-invalid` : ''].filter(Boolean).join(' ') || undefined;
  return (
    <div class={props.wide ? 'field wide' : 'field'}>
      <Label for={id} name={labelFor(props)} required={props.required} />
      {props.children({ id, describedBy, invalid: !!problems?.length })}
      {hint && (
        <p class="hint" id={`${id}-hint`}>
          {hint}
        </p>
      )}
      <Problems path={props.path} ctx={props.ctx} id={`${id}-invalid`} />
    </div>
  );
}

function placeholderOf(schema: JsonSchema): string | undefined {
  return schema.default !== undefined ? `${typeof schema.default === 'string' ? schema.default : JSON.stringify(schema.default)} (default)` : undefined;
}

function TextControl(props: FieldProps) {
  const { schema, value } = props;
  const numeric = schema.type === 'integer' || schema.type === 'number';
  // Secrets of a service file (an MQTT or OPC UA password) are not shown to someone looking on.
  const secret = /password|secret/i.test(props.name);
  const text = value === undefined ? '' : (tagText(value) ?? (typeof value === 'string' ? value : JSON.stringify(value)));
  const long = (schema.maxLength ?? 0) > 4096;
  return (
    <Scalar {...props} wide={long}>
      {({ id, describedBy, invalid }) =>
        long ? (
          <textarea id={id} rows={2} value={text} spellcheck={false} aria-describedby={describedBy} aria-invalid={invalid || undefined} onInput={(e) => props.onChange(parseText(e.currentTarget.value, false))} />
        ) : (
          <input
            {...({
              id,
              type: secret ? 'password' : 'text',
              autoComplete: secret ? 'new-password' : 'off',
              value: text,
              inputMode: numeric ? 'decimal' : undefined,
              placeholder: placeholderOf(schema),
              // Always a number: Preact turns a removed maxLength into 0 on a reused input.
              maxLength: schema.maxLength ?? 1_048_576,
              'aria-describedby': describedBy,
              'aria-invalid': invalid || undefined,
              onInput: (e: Event) => props.onChange(parseText((e.currentTarget as HTMLInputElement).value, numeric)),
            } as InputHTMLAttributes<HTMLInputElement>)}
          />
        )
      }
    </Scalar>
  );
}

function ChoiceControl(props: FieldProps & { choices: { value: string; label: string }[] }) {
  const current = props.value === undefined ? '' : (tagText(props.value) ?? String(props.value));
  const known = props.choices.some((c) => c.value === current);
  const unset = props.required && props.schema.default === undefined ? '(choose)' : `(not set${props.schema.default !== undefined ? `: ${String(props.schema.default)}` : ''})`;
  return (
    <Scalar {...props}>
      {({ id, describedBy, invalid }) => (
        <select id={id} value={current} aria-describedby={describedBy} aria-invalid={invalid || undefined} onChange={(e) => props.onChange(e.currentTarget.value === '' ? undefined : props.choices.find((c) => c.value === e.currentTarget.value)!.value)}>
          <option value="">{unset}</option>
          {!known && current !== '' && <option value={current}>{current}</option>}
          {props.choices.map((c) => (
            <option key={c.value} value={c.value}>
              {c.label}
            </option>
          ))}
        </select>
      )}
    </Scalar>
  );
}

function EnumControl(props: FieldProps) {
  const values = props.schema.enum!;
  const choices = values.map((v) => ({ value: String(v), label: String(v) }));
  return <ChoiceControl {...props} choices={choices} onChange={(v) => props.onChange(v === undefined ? undefined : values.find((x) => String(x) === v))} />;
}

function BooleanControl(props: FieldProps) {
  return <ChoiceControl {...props} choices={[{ value: 'true', label: 'yes (true)' }, { value: 'false', label: 'no (false)' }]} onChange={(v) => props.onChange(v === undefined ? undefined : v === 'true')} />;
}

/** A `!ref` to another resource of the service: a picker of those of the right type. */
function RefControl(props: FieldProps & { type: string | null }) {
  const options = props.ctx.resources.filter((r) => (props.type === null || r.type === props.type) && r.name !== undefined);
  const current = isObj(props.value) && typeof props.value['!ref'] === 'string' ? props.value['!ref'] : props.value === undefined ? '' : String(tagText(props.value) ?? props.value);
  const choices = options.map((r) => ({ value: r.name, label: `${r.name}${props.type === null ? ` (${r.type})` : ''}` }));
  return (
    <ChoiceControl
      {...props}
      value={current === '' ? undefined : current}
      // "The connection: !ref <resourceName>." is how a file says it; the form says which resources fit.
      schema={{ ...props.schema, description: props.type && (!props.schema.description || /!ref <\w+>\.?$/.test(props.schema.description)) ? `A ${props.type} of this service.` : props.schema.description }}
      choices={choices}
      onChange={(v) => props.onChange(v === undefined ? undefined : { '!ref': v })}
    />
  );
}

function JsonControl(props: FieldProps) {
  const text = props.value === undefined ? '' : JSON.stringify(props.value, null, 1);
  return (
    <Scalar {...props} wide>
      {({ id, describedBy, invalid }) => (
        <textarea
          id={id}
          rows={3}
          spellcheck={false}
          value={text}
          aria-describedby={describedBy}
          aria-invalid={invalid || undefined}
          onChange={(e) => {
            const t = e.currentTarget.value.trim();
            if (t === '') return props.onChange(undefined);
            try {
              props.onChange(JSON.parse(t) as Json);
            } catch {
              props.onChange(t);
            }
          }}
        />
      )}
    </Scalar>
  );
}

/** The legend of a group of fields (required marked) and its description. */
function GroupHead(props: { name: string; required: boolean; description?: string }) {
  return (
    <>
      <legend>
        {props.name}
        {props.required ? <span class="required"> (required)</span> : null}
      </legend>
      {props.description && <p class="hint">{props.description}</p>}
    </>
  );
}

/** Several enum values (e.g. securityModes): one checkbox each. */
function EnumListControl(props: FieldProps) {
  const values = props.schema.items!.enum!;
  const list = Array.isArray(props.value) ? props.value : [];
  const id = fieldId(props.path);
  return (
    <fieldset class="group" id={id}>
      <GroupHead name={labelFor(props)} required={props.required} description={props.schema.description} />
      <div class="choices">
        {values.map((v) => (
          <div class="check" key={String(v)}>
            <input
              type="checkbox"
              id={`${id}-${String(v)}`}
              checked={list.includes(v)}
              onChange={(e) => {
                const next = e.currentTarget.checked ? [...list, v] : list.filter((x) => x !== v);
                props.onChange(next.length ? values.filter((x) => next.includes(x)) : undefined);
              }}
            />
            <label for={`${id}-${String(v)}`}>{String(v)}</label>
          </div>
        ))}
      </div>
      <Problems path={props.path} ctx={props.ctx} />
    </fieldset>
  );
}

/** A list of items with a schema of their own (mappings, OPC UA nodes). */
function ItemListControl(props: FieldProps) {
  const list = Array.isArray(props.value) ? props.value : [];
  const itemSchema = props.schema.items!;
  const set = (next: Json[]) => props.onChange(next.length || props.required ? next : undefined);
  return (
    <fieldset class="group" id={fieldId(props.path)}>
      <GroupHead name={labelFor(props)} required={props.required} description={props.schema.description} />
      <Problems path={props.path} ctx={props.ctx} />
      {list.map((item, i) => (
        <fieldset class="item" key={i}>
          <legend>
            {labelFor(props)} {i + 1}
          </legend>
          <ObjectFields schema={itemSchema} value={isObj(item) ? item : {}} path={`${props.path}[${i}]`} ctx={props.ctx} onChange={(v) => set(list.map((x, j) => (j === i ? v : x)))} />
          <Button class="small" variant="plain" onClick={() => set(list.filter((_, j) => j !== i))} aria-label={`Remove ${labelFor(props)} ${i + 1}`}>
            Remove
          </Button>
        </fieldset>
      ))}
      <Button class="small" onClick={() => set([...list, itemSchema.properties ? skeleton(itemSchema) : ''])}>
        Add to {inSentence(labelFor(props))}
      </Button>
    </fieldset>
  );
}

/** Plain values one per line (a list of strings). */
function LinesControl(props: FieldProps) {
  const list = Array.isArray(props.value) ? props.value : [];
  return (
    <Scalar {...props} wide schema={{ ...props.schema, description: `${props.schema.description ?? ''} One per line.`.trim() }}>
      {({ id, describedBy, invalid }) => (
        <textarea
          id={id}
          rows={3}
          value={list.map(String).join('\n')}
          aria-describedby={describedBy}
          aria-invalid={invalid || undefined}
          onInput={(e) => {
            const lines = e.currentTarget.value.split('\n').filter((l) => l !== '');
            props.onChange(lines.length ? lines.map((l) => parseText(l, props.schema.items?.type === 'integer' || props.schema.items?.type === 'number')) : undefined);
          }}
        />
      )}
    </Scalar>
  );
}

/** A map of names to values (e.g. HTTP headers): one row each. */
function MapControl(props: FieldProps) {
  const map = isObj(props.value) ? props.value : {};
  const entries = Object.entries(map);
  const id = fieldId(props.path);
  const set = (next: [string, Json][]) => props.onChange(next.length ? Object.fromEntries(next) : undefined);
  return (
    <fieldset class="group" id={id}>
      <legend>{labelFor(props)}</legend>
      {props.schema.description && <p class="hint">{props.schema.description}</p>}
      {entries.map(([k, v], i) => (
        <div class="row map-row" key={i}>
          <div class="field grow">
            <label for={`${id}-k${i}`}>Name {i + 1}</label>
            <input id={`${id}-k${i}`} type="text" value={k} onChange={(e) => set(entries.map((x, j) => (j === i ? [e.currentTarget.value, x[1]] : x)))} />
          </div>
          <div class="field grow">
            <label for={`${id}-v${i}`}>Value {i + 1}</label>
            <input id={`${id}-v${i}`} type="text" value={String(tagText(v) ?? v ?? '')} onInput={(e) => set(entries.map((x, j) => (j === i ? [x[0], parseText(e.currentTarget.value, false) ?? ''] : x)))} />
          </div>
          <Button class="small" variant="plain" onClick={() => set(entries.filter((_, j) => j !== i))} aria-label={`Remove ${labelFor(props)} ${k || i + 1}`}>
            Remove
          </Button>
        </div>
      ))}
      <Button class="small" onClick={() => set([...entries, [`name${entries.length + 1}`, '']])}>
        Add to {inSentence(labelFor(props))}
      </Button>
      <Problems path={props.path} ctx={props.ctx} />
    </fieldset>
  );
}

/** An object property: its own fields, or those of the definition it follows. */
function GroupControl(props: FieldProps) {
  let schema = props.schema;
  let picker: ComponentChildren = null;
  const id = fieldId(props.path);
  // The kind chosen while the value does not show it yet (no required property typed).
  const [picked, setPicked] = useState<string | undefined>(undefined);
  if (!schema.properties && props.ctx.root.definitions) {
    const key = variantKey(props.siblings, props.parent, props.ctx);
    // An endpoint's address before its connection is chosen: no fields of a protocol it may not
    // have (an S7 endpoint never shows Modbus' table), until the choice says which.
    if (key.unresolved && (!isObj(props.value) || Object.keys(props.value).length === 0)) {
      const by = props.parent.properties?.[key.by!];
      return (
        <fieldset class="group" id={id}>
          <GroupHead name={labelFor(props)} required={props.required} />
          <Problems path={props.path} ctx={props.ctx} />
          <p class="hint">Choose the {inSentence(by ? labelOf(key.by!, by) : key.by!)} first: the fields follow its protocol.</p>
        </fieldset>
      );
    }
    const options = candidates(props.ctx, key.value);
    const chosen = chosenDefinition(options, props.value, props.ctx, picked);
    const labels = props.ctx.hints.definitionLabels?.[props.ctx.root.title ?? ''] ?? {};
    // The chosen definition's own description (the property's only names the definitions: text for developers).
    if (chosen) schema = { ...props.ctx.root.definitions[chosen]!, title: props.schema.title ?? props.ctx.root.definitions[chosen]!.title };
    if (options.length > 1) {
      picker = (
        <div class="field">
          <label for={`${id}-kind`}>Kind of {inSentence(labelFor(props))}</label>
          <select
            id={`${id}-kind`}
            value={chosen}
            onChange={(e) => {
              setPicked(e.currentTarget.value);
              props.onChange(skeleton(props.ctx.root.definitions![e.currentTarget.value]!));
            }}
          >
            {options.map((o) => (
              <option key={o} value={o}>
                {labels[o] ?? o}
              </option>
            ))}
          </select>
        </div>
      );
    }
  }
  if (!schema.properties) return <JsonControl {...props} />;
  const value = isObj(props.value) ? props.value : {};
  return (
    <fieldset class="group" id={id}>
      <GroupHead name={labelFor(props)} required={props.required} description={schema.description} />
      <Problems path={props.path} ctx={props.ctx} />
      {picker}
      <ObjectFields schema={schema} value={value} path={props.path} ctx={props.ctx} onChange={(v) => props.onChange(Object.keys(v as Obj).length || props.required ? v : undefined)} />
    </fieldset>
  );
}

/** A property that is one of several shapes (text or settings): a choice of the shape, then its field. */
function OneOfControl(props: FieldProps) {
  const alternatives = props.schema.oneOf!;
  const [picked, setPicked] = useState<number | undefined>(undefined);
  const fits = (alt: JsonSchema) => (alt.type === 'object' ? isObj(props.value) && !isTagValue(props.value) : alt.type === 'array' ? Array.isArray(props.value) : !isObj(props.value) || isTagValue(props.value));
  const index = props.value === undefined ? (picked ?? 0) : Math.max(0, alternatives.findIndex(fits));
  const id = fieldId(props.path);
  const shapeOf = (alt: JsonSchema) => alt.title ?? (alt.type === 'object' ? 'settings' : alt.type === 'string' ? 'text' : (alt.type ?? 'value'));
  // The field inside carries the path's id (problems and the summary's links go there).
  return (
    <fieldset class="group" id={`${id}-shapes`}>
      <GroupHead name={labelFor(props)} required={props.required} description={props.schema.description} />
      <div class="field">
        <label for={`${id}-kind`}>Kind of {inSentence(labelFor(props))}</label>
        <select
          id={`${id}-kind`}
          value={String(index)}
          onChange={(e) => {
            const i = Number(e.currentTarget.value);
            setPicked(i);
            props.onChange(alternatives[i]!.type === 'object' ? skeleton(alternatives[i]!) : undefined);
          }}
        >
          {alternatives.map((alt, i) => (
            <option key={i} value={String(i)}>
              {shapeOf(alt)}
            </option>
          ))}
        </select>
      </div>
      <Field {...props} label={`${labelFor(props)} (${shapeOf(alternatives[index]!)})`} schema={{ ...alternatives[index]!, default: props.schema.default }} />
    </fieldset>
  );
}

function Field(props: FieldProps) {
  const { schema, value } = props;
  if (schema.oneOf && !schema.type) return <OneOfControl {...props} />;
  const ref = refTypeOf(props.name, schema, props.ctx);
  if (ref !== undefined) return <RefControl {...props} type={ref} />;
  if (isTagValue(value) && schema.type !== 'object') return <TextControl {...props} />;
  if (schema.enum) return <EnumControl {...props} />;
  switch (schema.type) {
    case 'boolean':
      return <BooleanControl {...props} />;
    case 'string':
    case 'integer':
    case 'number':
      return <TextControl {...props} />;
    case 'object':
      if (!schema.properties && isObj(schema.additionalProperties)) return <MapControl {...props} />;
      return <GroupControl {...props} />;
    case 'array':
      if (schema.items?.enum) return <EnumListControl {...props} />;
      if (schema.items?.type === 'object') return <ItemListControl {...props} />;
      return <LinesControl {...props} />;
    default:
      return <JsonControl {...props} />;
  }
}

/**
 * The fields of an object schema. Changing a property that chooses the definition of a sibling
 * (a connection's protocol, an endpoint's connection) starts that sibling afresh: the old
 * settings belong to another kind.
 */
export function ObjectFields(props: { schema: JsonSchema; value: Obj; path: string; ctx: FormContext; onChange: (value: Obj) => void }) {
  const { schema, value, ctx } = props;
  const required = new Set(schema.required ?? []);
  const dependents = (key: string) =>
    Object.entries(schema.properties ?? {}).filter(([name, p]) => name !== key && p.type === 'object' && !p.properties && ctx.root.definitions && variantKey(value, schema, ctx).by === key);
  const known = new Set(Object.keys(schema.properties ?? {}));
  const unknown = Object.keys(value).filter((k) => !known.has(k));
  // A resource's own properties follow its type's rules; nested objects show every field.
  const atResource = schema === ctx.root;
  const rules = atResource ? [ctx.hints.fieldRules?.['*'], ctx.hints.fieldRules?.[ctx.root.title ?? '']].filter((r): r is FieldRule => !!r) : [];
  const hidden = new Set(rules.flatMap((r) => r.hidden?.(value, ctx.resources) ?? []));
  const folded = new Set(rules.flatMap((r) => r.folded ?? []));
  const shown = Object.entries(schema.properties ?? {}).filter(([name]) => !hidden.has(name) || value[name] !== undefined);
  const field = ([name, p]: [string, JsonSchema]) => (
    <Field
      key={name}
      name={name}
      schema={p}
      value={value[name]}
      required={required.has(name)}
      path={`${props.path}.${name}`}
      ctx={ctx}
      siblings={value}
      parent={schema}
      onChange={(v) => {
        const next: Obj = { ...value };
        if (v === undefined) delete next[name];
        else next[name] = v;
        if (JSON.stringify(v) !== JSON.stringify(value[name])) for (const [dep] of dependents(name)) next[dep] = {};
        props.onChange(next);
      }}
    />
  );
  const main = shown.filter(([name]) => !folded.has(name) || required.has(name));
  const more = shown.filter(([name]) => folded.has(name) && !required.has(name));
  const hasProblem = (name: string) => [...ctx.problems.keys()].some((k) => k === `${props.path}.${name}` || k.startsWith(`${props.path}.${name}.`) || k.startsWith(`${props.path}.${name}[`));
  const moreOpen = more.some(([name]) => value[name] !== undefined || hasProblem(name));
  return (
    <>
      <div class="fields">{main.map(field)}</div>
      {more.length > 0 && (
        <details class="more" open={moreOpen}>
          <summary>More settings: {more.map(([name, p]) => inSentence(labelOf(name, p))).join(', ')}</summary>
          <div class="fields">{more.map(field)}</div>
        </details>
      )}
      {unknown.length > 0 && (
        <p class="hint">
          Also set in the file (not part of this form): {unknown.map((k) => <code key={k}>{k}</code>)}. Edit them in the YAML tab.
        </p>
      )}
    </>
  );
}

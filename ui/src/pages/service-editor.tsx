// One service in the browser (a chunk of its own, with the YAML parser and mqtt.js): first what it
// runs now (service-now.tsx: every resource's state, live values and writes), then its
// configuration — a folding panel per resource with the form its type's JSON Schema gives (GET
// /api/resource-types; service-resources.tsx), a YAML tab for the whole file, "Check" (the dry
// run: every problem marked at its field) and "Apply" (what restarted) — and last, apart from
// Apply, the deletion of the service.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { ApiError, api } from '../api.js';
import { ConfirmButton } from '../components/dialog.js';
import { ErrorMessage, Loading, Notice } from '../components/feedback.js';
import { Button, TextArea } from '../components/forms.js';
import { fieldId, newResource } from '../components/schema-form.js';
import { useAction, useAsync } from '../hooks.js';
import { Link, location, navigate } from '../router.js';
import { can } from '../session.js';
import type { ResourceChanges, ResourceType, ServiceProblem, ServiceSummary } from '../types.js';
import { serviceFormHints } from './service-form-hints.js';
import { ServiceNow } from './service-now.js';
import { AddResource, ResourcePanel } from './service-resources.js';
import { YamlError, documentToYaml, yamlToDocument, type ServiceDocument } from './service-yaml.js';

const YAML = 'application/yaml';

interface Loaded {
  types: ResourceType[];
  doc: ServiceDocument;
  text: string;
  summary?: ServiceSummary;
  /** The file on disk is not valid YAML: only the YAML tab works. */
  unreadable?: string;
}

/** Where a problem is shown: a missing required property at that property's field. */
function targetOf(p: ServiceProblem): string {
  const missing = /required property '([^']+)'/.exec(p.message);
  return missing ? (p.path ? `${p.path}.${missing[1]}` : missing[1]!) : p.path;
}

function problemMap(problems: ServiceProblem[]): Map<string, string[]> {
  const map = new Map<string, string[]>();
  for (const p of problems) {
    const at = targetOf(p);
    map.set(at, [...(map.get(at) ?? []), p.message]);
  }
  return map;
}

/** Focuses the field of a path, or the nearest enclosing one that is on the page. */
function focusPath(path: string): void {
  let p = path;
  for (let i = 0; i < 20 && p; i++) {
    const el = document.getElementById(fieldId(p));
    if (el) {
      el.scrollIntoView({ block: 'center' });
      (el.matches('input, select, textarea') ? el : (el.querySelector<HTMLElement>('input, select, textarea') ?? el)).focus();
      return;
    }
    p = p.replace(/(\.[^.[\]]+|\[\d+\])$/, '');
  }
}

function describeChanges(c: ResourceChanges, dryRun: boolean): string {
  const part = (what: string, ids: string[]) => (ids.length ? `${what} ${ids.join(', ')}` : '');
  const text = [part(dryRun ? 'would add' : 'added', c.added), part(dryRun ? 'would restart' : 'restarted', c.restarted), part(dryRun ? 'would retarget' : 'retargeted', c.retargeted), part(dryRun ? 'would stop' : 'stopped', c.removed)]
    .filter(Boolean)
    .join('; ');
  return text || (dryRun ? 'nothing would change' : 'nothing changed');
}

function ProblemSummary(props: { problems: ServiceProblem[] }) {
  if (!props.problems.length) return null;
  return (
    <div class="alert error" role="alert">
      <strong>
        {props.problems.length} problem{props.problems.length === 1 ? '' : 's'} (each marked at its field):
      </strong>
      <ul>
        {props.problems.map((p, i) => (
          <li key={i}>
            {p.path ? (
              <a
                href={`#${fieldId(targetOf(p))}`}
                onClick={(e) => {
                  e.preventDefault();
                  focusPath(targetOf(p));
                }}
              >
                <code>{p.path}</code>
              </a>
            ) : null}{' '}
            {p.message}
          </li>
        ))}
      </ul>
    </div>
  );
}

/** The resources of a service document, in file order: what its page shows running. */
const resourcesOf = (d: ServiceDocument) => Object.entries(d.resources ?? {}).map(([name, r]) => ({ name, type: r.type }));

async function load(id: string, isNew: boolean): Promise<Loaded> {
  const types = await api<ResourceType[]>('GET', '/api/resource-types');
  const summaries = await api<ServiceSummary[]>('GET', '/api/services');
  const summary = summaries.find((s) => s.id === id);
  if (!summary) {
    if (!isNew) throw new ApiError(404, `There is no service ${id}.`);
    return { types, doc: { resources: {} }, text: '' };
  }
  const text = await api<string>('GET', `/api/services/${encodeURIComponent(id)}`, { headers: { accept: YAML } });
  try {
    return { types, summary, doc: yamlToDocument(text), text };
  } catch (err) {
    return { types, summary, doc: { resources: {} }, text, unreadable: err instanceof Error ? err.message : String(err) };
  }
}

export function ServiceEditorPage(props: { params: Record<string, string> }) {
  const id = props.params.id!;
  const isNew = location.value.query.get('new') === '1';
  const loaded = useAsync(() => load(id, isNew), [id]);
  if (loaded.error) {
    return (
      <section class="page">
        <h1>Service {id}</h1>
        <ErrorMessage error={loaded.error} />
        <p>
          <Link href="/services">Back to the services</Link>
        </p>
      </section>
    );
  }
  if (!loaded.data) return <Loading what={`service ${id}`} />;
  return <Editor id={id} loaded={loaded.data} />;
}

function Editor(props: { id: string; loaded: Loaded }) {
  const { id, loaded } = props;
  const [doc, setDoc] = useState<ServiceDocument>(loaded.doc);
  const [text, setText] = useState(loaded.text);
  const [tab, setTab] = useState<'form' | 'yaml'>(loaded.unreadable ? 'yaml' : 'form');
  // Which representation holds the last edit: the other one is regenerated from it on a tab switch.
  const [edited, setEdited] = useState<'form' | 'yaml' | null>(null);
  const [problems, setProblems] = useState<ServiceProblem[]>([]);
  const [summary, setSummary] = useState<ServiceSummary | undefined>(loaded.summary);
  const [version, setVersion] = useState(0);
  // The resources the running service has: the file as loaded, then as last applied.
  const [applied, setApplied] = useState(() => resourcesOf(loaded.doc));
  const action = useAction();
  const mayWrite = can('write', `/api/services/${id}`);
  const exists = summary !== undefined;

  const schemas = useMemo(() => new Map(loaded.types.map((t) => [t.type, t.schema])), [loaded.types]);
  const problemsByPath = useMemo(() => problemMap(problems), [problems]);
  const resources = Object.entries(doc.resources ?? {});
  // Panels folded for an existing service (it fits a screen), open for a new one; a resource
  // added here or with a problem opens.
  const [open, setOpen] = useState<Set<string>>(() => new Set(loaded.summary ? [] : resources.map(([n]) => n)));
  const toggle = (name: string, on: boolean) =>
    setOpen((o) => {
      const next = new Set(o);
      if (on) next.add(name);
      else next.delete(name);
      return next;
    });
  useEffect(() => {
    const withProblems = problems.map((p) => /^resources\.([^.[]+)/.exec(targetOf(p))?.[1]).filter((n): n is string => !!n);
    if (withProblems.length) setOpen((o) => new Set([...o, ...withProblems]));
  }, [problems]);
  const ctx = { problems: problemsByPath, resources: resources.map(([name, r]) => ({ name, type: r.type, properties: r.properties ?? {} })), hints: serviceFormHints };
  useEffect(() => {
    document.title = `Service ${id} · gatewayd`;
  }, [id]);

  const editDoc = (next: ServiceDocument) => {
    setDoc(next);
    setEdited('form');
  };
  /** The current file: the YAML text when it holds the last edit (comments kept), else the form's document. */
  const body = (): { text: { body: string; type: string } } | { body: ServiceDocument } => (tab === 'yaml' || edited === 'yaml' ? { text: { body: text, type: YAML } } : { body: doc });

  const switchTo = (next: 'form' | 'yaml') => {
    if (next === tab) return;
    if (next === 'yaml' && edited === 'form') setText(documentToYaml(doc));
    if (next === 'form' && edited === 'yaml') {
      try {
        setDoc(yamlToDocument(text));
      } catch (err) {
        setProblems(err instanceof YamlError ? err.problems : [{ path: '', message: String(err) }]);
        return;
      }
    }
    setEdited(null);
    setTab(next);
  };

  const check = () =>
    action.run(async () => {
      const result = await api<{ valid: boolean; problems: ServiceProblem[]; changes?: ResourceChanges }>('POST', `/api/services/${encodeURIComponent(id)}/validate`, body());
      setProblems(result.problems);
      // The problems are the answer (the summary above, each marked at its field).
      if (!result.valid) return;
      return `No problem found: applying ${describeChanges(result.changes!, true)}.`;
    });

  const apply = () =>
    action.run(async () => {
      try {
        const result = await api<{ service?: ServiceSummary; changes: ResourceChanges }>('PUT', `/api/services/${encodeURIComponent(id)}`, body());
        setProblems([]);
        setSummary(result.service);
        setVersion((v) => v + 1);
        try {
          setApplied(resourcesOf(tab === 'yaml' || edited === 'yaml' ? yamlToDocument(text) : doc));
        } catch {
          // applied from YAML the form cannot read: the list stays as it was
        }
        if (location.value.query.get('new')) navigate(`/services/${encodeURIComponent(id)}`, { replace: true });
        return `Applied: ${describeChanges(result.changes, false)}.`;
      } catch (err) {
        if (err instanceof ApiError && err.errors?.length) setProblems(err.errors);
        throw err;
      }
    });

  const tabButton = (key: 'form' | 'yaml', label: string) => (
    <button type="button" role="tab" id={`tab-${key}`} aria-selected={tab === key} aria-controls={`panel-${key}`} tabIndex={tab === key ? 0 : -1} onClick={() => switchTo(key)}>
      {label}
    </button>
  );

  return (
    <section class="page service-editor">
      <p>
        <Link href="/services">Services</Link> / {id}
      </p>
      <h1>
        {exists ? 'Service' : 'New service'} {id}
      </h1>
      {summary && (
        <p>
          <span class={`badge ${summary.state === 'applied' ? 'good' : 'bad'}`}>{summary.state}</span> file <code>{summary.file}</code>
          {summary.running ? ' · running' : ''}
          {doc.description ? ` · ${doc.description}` : ''}
        </p>
      )}
      {loaded.unreadable && <ErrorMessage error={new Error(`The file is not valid YAML (${loaded.unreadable}); correct it in the YAML tab.`)} />}
      {exists && <ServiceNow serviceId={id} version={version} resources={applied} />}

      <section class="panel configuration" aria-labelledby="config-title">
        <h2 id="config-title">Configuration</h2>
        <div
          class="tabs"
          role="tablist"
          aria-label="Edit as"
          onKeyDown={(e) => {
            if (e.key === 'ArrowRight' || e.key === 'ArrowLeft') {
              const next = tab === 'form' ? 'yaml' : 'form';
              switchTo(next);
              document.getElementById(`tab-${next}`)?.focus();
            }
          }}
        >
          {tabButton('form', 'Resources')}
          {tabButton('yaml', 'YAML')}
        </div>
        <div class="actions editor-actions">
          {can('write', `/api/services/${id}/validate`) && (
            <Button busy={action.busy} onClick={() => void check()}>
              Check
            </Button>
          )}
          {mayWrite && (
            <Button variant="primary" busy={action.busy} onClick={() => void apply()}>
              Apply
            </Button>
          )}
          {mayWrite && <span class="hint">{tab === 'form' ? 'Applying from this tab writes the file anew from the form (without comments).' : 'Applying from this tab keeps the file as written, comments included.'}</span>}
        </div>
        {action.done && <Notice kind="success">{action.done}</Notice>}
        {action.error && !(action.error instanceof ApiError && action.error.errors?.length && problems.length) ? <ErrorMessage error={action.error} /> : null}
        <ProblemSummary problems={problems} />

        {tab === 'form' ? (
          // Keyed: Preact must not reuse one panel's controls for the other (a maxLength removed from a reused textarea becomes 0).
          <div key="form" role="tabpanel" id="panel-form" aria-labelledby="tab-form">
            <details class="more" open={!exists}>
              <summary>Description of the service</summary>
              <TextArea label="Description" value={doc.description ?? ''} rows={1} maxLength={4096} onValue={(v) => editDoc({ ...doc, description: v || undefined })} />
            </details>
            {doc.parameters && Object.keys(doc.parameters).length > 0 && (
              <p class="hint">
                Parameters (edit them in the YAML tab; a field takes one as <code>!ref name</code>):{' '}
                {Object.entries(doc.parameters).map(([k, p]) => (
                  <code key={k}>
                    {k} = {JSON.stringify(p.default)}{' '}
                  </code>
                ))}
              </p>
            )}
            {resources.length === 0 && <p class="hint">No resource yet: add a connection first, then its endpoints.</p>}
            {resources.map(([name, r]) => (
              <ResourcePanel
                key={name}
                name={name}
                type={r.type}
                schema={schemas.get(r.type)}
                properties={r.properties ?? {}}
                ctx={ctx}
                open={open.has(name)}
                onToggle={(on) => toggle(name, on)}
                onChange={(p) => editDoc({ ...doc, resources: { ...doc.resources, [name]: { ...r, properties: p } } })}
                {...(mayWrite
                  ? {
                      onRemove: () => {
                        const next = { ...doc.resources };
                        delete next[name];
                        editDoc({ ...doc, resources: next });
                      },
                    }
                  : {})}
              />
            ))}
            {mayWrite && (
              <AddResource
                types={loaded.types}
                existing={resources.map(([n]) => n)}
                onAdd={(name, t) => {
                  toggle(name, true);
                  editDoc({ ...doc, resources: { ...doc.resources, [name]: { type: t.type, properties: newResource(t.schema, ctx) } } });
                }}
              />
            )}
          </div>
        ) : (
          <div key="yaml" role="tabpanel" id="panel-yaml" aria-labelledby="tab-yaml">
            <TextArea
              label="Service file (YAML)"
              class="yaml"
              rows={24}
              value={text}
              onValue={(v) => {
                setText(v);
                setEdited('yaml');
              }}
              hint="The whole file as it is stored: comments are kept when you apply from here."
            />
          </div>
        )}
      </section>

      {mayWrite && exists && (
        <section class="panel danger-zone" aria-labelledby="delete-title">
          <h2 id="delete-title">Delete this service</h2>
          <p class="hint">
            Its file <code>{summary?.file}</code> is deleted and every resource it runs stops (asked first).
          </p>
          <ConfirmButton
            label="Delete service"
            title={`Delete service ${id}`}
            question={<p>Its file is deleted and its resources stop.</p>}
            confirmLabel="Delete service"
            onConfirm={async () => {
              await api('DELETE', `/api/services/${encodeURIComponent(id)}`);
              navigate('/services');
            }}
          />
        </section>
      )}
    </section>
  );
}

// Services: the files of the services directory through /api/services — which run, which the
// gateway refused and why, how many resources of each kind; create one (its id is the file
// name), open one in the editor, delete one (its resources stop).
import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { ConfirmButton, Dialog } from '../components/dialog.js';
import { ErrorMessage, Loading, Notice } from '../components/feedback.js';
import { Button, TextField } from '../components/forms.js';
import { Table } from '../components/table.js';
import { formatDate } from '../components/widgets.js';
import { useAsync } from '../hooks.js';
import { Link, navigate } from '../router.js';
import { can } from '../session.js';
import type { ServiceSummary } from '../types.js';

/** The gateway's rule for a service id (the file name without .yaml). */
export const SERVICE_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

export function resourceCounts(r: ServiceSummary['resources']): string {
  const parts = Object.entries(r)
    .filter(([, n]) => n > 0)
    .map(([kind, n]) => `${n} ${n === 1 ? kind.replace(/s$/, '') : kind}`);
  return parts.length ? parts.join(', ') : 'none';
}

function NewService(props: { existing: string[] }) {
  const [open, setOpen] = useState(false);
  const [id, setId] = useState('');
  const [touched, setTouched] = useState(false);
  const invalid = !SERVICE_ID.test(id) ? 'Letters, digits, _ and - (it becomes the file name <id>.yaml); it starts with a letter or digit.' : props.existing.includes(id) ? 'A service with this id exists.' : undefined;
  return (
    <>
      <Button variant="primary" onClick={() => (setId(''), setTouched(false), setOpen(true))}>
        New service
      </Button>
      <Dialog open={open} title="New service" onClose={() => setOpen(false)}>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            setTouched(true);
            if (invalid) return;
            setOpen(false);
            navigate(`/services/${encodeURIComponent(id)}?new=1`);
          }}
        >
          <TextField label="Service id" value={id} onValue={setId} required maxLength={128} autoFocus invalid={touched ? invalid : undefined} hint="Its resources get ids <service>.<resource>; endpoints publish under services/<service>/…" />
          <div class="actions">
            <Button type="submit" variant="primary">
              Create and edit
            </Button>
            <Button onClick={() => setOpen(false)}>Cancel</Button>
          </div>
        </form>
      </Dialog>
    </>
  );
}

export function ServicesPage() {
  const list = useAsync(() => api<ServiceSummary[]>('GET', '/api/services'), []);
  const [deleted, setDeleted] = useState<string | null>(null);
  const services = list.data;
  return (
    <section class="page">
      <div class="row">
        <h1 class="grow">Services</h1>
        {can('write', '/api/services/x') && <NewService existing={(services ?? []).map((s) => s.id)} />}
      </div>
      <p class="hint">
        Each service is one file of the gateway's services directory with its connections, endpoints, mappings and OPC UA resources. Applying a change restarts only the resources it changes; their live states are on the <Link href="/mapping">mapping page</Link>.
      </p>
      {deleted && <Notice kind="success">{deleted}</Notice>}
      <ErrorMessage error={list.error} />
      {!services ? (
        list.error ? null : <Loading what="the services" />
      ) : (
        <Table columns={['Service', 'Description', 'State', 'Resources', 'Modified', null]} rows={services.length} empty="No service yet." region="Services">
          {services.map((s) => (
            <tr key={s.id} data-service={s.id}>
              <th scope="row">
                <Link href={`/services/${encodeURIComponent(s.id)}`}>{s.id}</Link>
              </th>
              <td>{s.description ?? ''}</td>
              <td>
                <span class={`badge ${s.state === 'applied' ? 'good' : 'bad'}`}>{s.state}</span>
                {s.state === 'refused' && (
                  <ul class="plain-list problems">
                    {s.problems.slice(0, 5).map((p, i) => (
                      <li key={i}>
                        {p.path && <code>{p.path}</code>} {p.message}
                      </li>
                    ))}
                  </ul>
                )}
              </td>
              <td>{resourceCounts(s.resources)}</td>
              <td>
                <span data-volatile>{formatDate(s.modifiedAt)}</span>
              </td>
              <td class="actions">
                {can('write', `/api/services/${s.id}`) && (
                  <ConfirmButton
                    label="Delete"
                    class="small"
                    aria-label={`Delete service ${s.id}`}
                    title={`Delete service ${s.id}`}
                    question={
                      <p>
                        The file <code>{s.file}</code> is deleted and its resources stop.
                      </p>
                    }
                    confirmLabel="Delete service"
                    onConfirm={async () => {
                      const res = await api<{ changes: { removed: string[] } }>('DELETE', `/api/services/${encodeURIComponent(s.id)}`);
                      setDeleted(`Service ${s.id} deleted; stopped: ${res.changes.removed.join(', ') || 'nothing'}.`);
                      await list.reload();
                    }}
                  />
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
    </section>
  );
}

// Devices: the self-registration window (open for a chosen time with a live countdown, lock),
// pending requests (details, confirm with roles, permissions and grant types, or reject), and
// the trusted certificates of MQTTS clients, with the gateway CA certificate to download.
import { useState } from 'preact/hooks';
import { api, download } from '../api.js';
import { ConfirmButton, Dialog } from '../components/dialog.js';
import { ErrorMessage, Loading, Notice } from '../components/feedback.js';
import { Button, Checkbox, FileField, SelectField, TextArea, TextField } from '../components/forms.js';
import { PermissionEditor, permissionText } from '../components/permission-editor.js';
import { RolePicker, type RoleRef } from '../components/role-picker.js';
import { Table } from '../components/table.js';
import { Code, formatDate, formatDuration, plural } from '../components/widgets.js';
import { useAction, useAsync, useNow, usePoll } from '../hooks.js';
import { can } from '../session.js';
import type { GrantMethod, PendingRegistration, PermissionInput, RegistryStatus, TrustedCertificate, User } from '../types.js';

const durations = [
  { value: '60000', label: '1 minute' },
  { value: '300000', label: '5 minutes' },
  { value: '900000', label: '15 minutes' },
  { value: '1800000', label: '30 minutes' },
  { value: '3600000', label: '1 hour' },
];

function RegistryWindow(props: { status: RegistryStatus | undefined; reload: () => Promise<void> }) {
  const [duration, setDuration] = useState('300000');
  const action = useAction();
  const now = useNow(1000);
  const s = props.status;
  const left = s && s.status === 'open' ? s.unlockedUntil - now : 0;
  const open = s?.status === 'open' && left > 0;
  return (
    <section class="panel" aria-labelledby="window-title">
      <h2 id="window-title">Registration window</h2>
      {!s ? (
        <Loading />
      ) : open ? (
        <p>
          <span class="badge open">open</span> Devices may register for another{' '}
          <span class="countdown" role="timer" data-volatile>
            {formatDuration(left)}
          </span>{' '}
          (until <span data-volatile>{formatDate(s.unlockedUntil)}</span>).
        </p>
      ) : (
        <p>
          <span class="badge off">locked</span> Devices cannot register now.
        </p>
      )}
      <div class="inline">
        <SelectField label="Open for" value={duration} options={durations} onValue={setDuration} />
        <Button
          variant="primary"
          busy={action.busy}
          onClick={() =>
            action.run(async () => {
              await api('POST', '/api/client-registry/open', { body: { duration: Number(duration) } });
              await props.reload();
              return `Registration is open for ${durations.find((d) => d.value === duration)!.label}.`;
            })
          }
        >
          {open ? 'Open again from now' : 'Open registration'}
        </Button>
        {open && (
          <ConfirmButton
            label="Lock now"
            title="Lock the registration"
            question={<p>Lock the registration now? Every pending request is dropped; devices must register again at the next opening.</p>}
            confirmLabel="Lock"
            onConfirm={async () => {
              await api('POST', '/api/client-registry/lock');
              await props.reload();
            }}
          />
        )}
      </div>
      <ErrorMessage error={action.error} />
      {action.done && <Notice kind="success">{action.done}</Notice>}
    </section>
  );
}

function ConfirmRequest(props: { request: PendingRegistration; onDone: (message: string) => Promise<void>; onCancel: () => void }) {
  const r = props.request;
  const [asRequested, setAsRequested] = useState(true);
  const [roles, setRoles] = useState<RoleRef[]>([]);
  const [permissions, setPermissions] = useState<PermissionInput[]>(r.permissions ?? []);
  const [grants, setGrants] = useState<Set<GrantMethod>>(new Set([r.credentialType === 'certificate' ? 'certificate' : 'password']));
  const [prefix, setPrefix] = useState('');
  const action = useAction();
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        void action.run(async () => {
          const body: Record<string, unknown> = { username: r.username, grantTypes: [...grants].map((method) => ({ method, isRequired: grants.size === 1 })) };
          if (!asRequested) {
            if (permissions.some((p) => !p.resource.trim())) throw new Error('every permission needs a resource');
            body.roles = roles.map((x) => x.id);
            body.initialPermissions = permissions;
          }
          if (prefix) body.mqttPublishPrefix = prefix;
          const user = await api<User>('POST', '/api/client-registry/confirm', { body });
          await props.onDone(`${user.username} was confirmed${r.credentialType === 'certificate' ? '; the device gets its certificate at its next request' : ''}.`);
        });
      }}
    >
      <dl class="facts">
        <dt>Device</dt>
        <dd>{r.username}</dd>
        <dt>Requested roles</dt>
        <dd>{r.roles?.length ? r.roles.join(', ') : 'none'}</dd>
        <dt>Requested permissions</dt>
        <dd>{r.permissions?.length ? r.permissions.map(permissionText).join(' · ') : 'none'}</dd>
      </dl>
      <Checkbox label="Grant the requested roles and permissions" checked={asRequested} onValue={setAsRequested} />
      {!asRequested && (
        <>
          <RolePicker legend="Shared roles to grant" selected={roles} onChange={setRoles} />
          <PermissionEditor legend="Permissions to grant" value={permissions} onChange={setPermissions} />
        </>
      )}
      <fieldset>
        <legend>Sign-in methods</legend>
        {(['password', 'certificate', 'token'] as const).map((m) => (
          <Checkbox
            key={m}
            label={m === 'password' ? 'Password' : m === 'certificate' ? 'Client certificate' : 'Session token'}
            checked={grants.has(m)}
            onValue={(on) => {
              const next = new Set(grants);
              if (on) next.add(m);
              else next.delete(m);
              setGrants(next);
            }}
          />
        ))}
      </fieldset>
      <TextField label="MQTT publish prefix" value={prefix} onValue={setPrefix} maxLength={65535} hint="Optional." />
      <ErrorMessage error={action.error} />
      <div class="actions">
        <Button type="submit" variant="primary" busy={action.busy}>
          Confirm {r.username}
        </Button>
        <Button onClick={props.onCancel}>Cancel</Button>
      </div>
    </form>
  );
}

function Requests(props: { requests: PendingRegistration[] | undefined; error: unknown; reload: () => Promise<void> }) {
  const [confirming, setConfirming] = useState<PendingRegistration | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const list = props.requests;
  return (
    <section class="panel" aria-labelledby="requests-title">
      <h2 id="requests-title">Registration requests</h2>
      <ErrorMessage error={props.error} />
      {done && <Notice kind="success">{done}</Notice>}
      {!list ? (
        props.error ? null : <Loading />
      ) : list.length === 0 ? (
        <p class="hint">No request. Devices register with POST /api/client-registry/register (or an MQTT connect with an unknown username) while the window is open.</p>
      ) : (
        <Table caption={plural(list.filter((r) => !r.granted).length, 'pending request')} columns={['Device', 'Credential', 'Context', 'Requested', 'Last heard', null]} rows={list.length} empty="No request.">
          {list.map((r) => (
            <tr key={r.username}>
              <th scope="row">{r.username}</th>
              <td>
                {r.credentialType === 'certificate' ? 'certificate request' : 'password'}
                {r.csrSubject && (
                  <p class="hint">
                    Subject: <code>{r.csrSubject}</code>
                  </p>
                )}
              </td>
              <td>{r.context || '—'}</td>
              <td>
                {r.roles?.length ? <p>Roles: {r.roles.join(', ')}</p> : null}
                {r.permissions?.length ? <p>Permissions: {r.permissions.map(permissionText).join(' · ')}</p> : null}
                {!r.roles?.length && !r.permissions?.length && '—'}
              </td>
              <td>
                <span data-volatile>{formatDate(r.timestamp)}</span>
              </td>
              <td class="actions">
                {r.granted ? (
                  <span class="badge good">confirmed, waiting for the device</span>
                ) : (
                  <>
                    <Button class="small" variant="primary" aria-label={`Confirm ${r.username}`} onClick={() => (setDone(null), setConfirming(r))}>
                      Confirm
                    </Button>
                    <ConfirmButton
                      class="small"
                      label="Reject"
                      aria-label={`Reject ${r.username}`}
                      title="Reject the request"
                      question={
                        <p>
                          Reject the request of <strong>{r.username}</strong>? It is dropped; the device may ask again while the window is open.
                        </p>
                      }
                      confirmLabel="Reject request"
                      onConfirm={async () => {
                        await api('DELETE', `/api/client-registry/runners/${encodeURIComponent(r.username)}`);
                        setDone(`The request of ${r.username} was rejected.`);
                        await props.reload();
                      }}
                    />
                  </>
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
      <Dialog open={confirming !== null} wide title={`Confirm ${confirming?.username ?? ''}`} onClose={() => setConfirming(null)}>
        {confirming && (
          <ConfirmRequest
            request={confirming}
            onCancel={() => setConfirming(null)}
            onDone={async (message) => {
              setConfirming(null);
              setDone(message);
              await props.reload();
            }}
          />
        )}
      </Dialog>
    </section>
  );
}

function certName(n: { commonName?: string; organization?: string } | undefined): string {
  if (!n) return '—';
  return [n.commonName, n.organization].filter(Boolean).join(', ') || '—';
}

function CertificateView(props: { cert: TrustedCertificate }) {
  const c = props.cert;
  const pem = useAsync(() => api<string>('GET', '/api/certificates/content', { query: { id: c.id }, as: 'json' }), [c.id]);
  return (
    <>
      <dl class="facts">
        <dt>Issued to</dt>
        <dd>{certName(c.issuedTo)}</dd>
        <dt>Issued by</dt>
        <dd>{certName(c.issuedBy)}</dd>
        <dt>Valid</dt>
        <dd>
          {formatDate(c.issuedOn)} – {formatDate(c.expiresOn)}
        </dd>
        <dt>Certificate authority</dt>
        <dd>{c.basicConstraints?.isCA ? 'yes' : 'no'}</dd>
        {c.issuedTo?.alternativeNames?.length ? (
          <>
            <dt>Alternative names</dt>
            <dd>{c.issuedTo.alternativeNames.join(', ')}</dd>
          </>
        ) : null}
        <dt>SHA-256</dt>
        <dd>
          <Code>{c.fingerprints.sha256 ?? c.id}</Code>
        </dd>
      </dl>
      <ErrorMessage error={pem.error} />
      {pem.data && <pre aria-label="PEM">{pem.data}</pre>}
    </>
  );
}

function TrustedCertificates() {
  const certs = useAsync(() => api<TrustedCertificate[]>('GET', '/api/certificates'), []);
  const [viewing, setViewing] = useState<TrustedCertificate | null>(null);
  const [pem, setPem] = useState('');
  const add = useAction();
  const ca = useAction();
  return (
    <section class="panel" aria-labelledby="certs-title">
      <h2 id="certs-title">Trusted certificates</h2>
      <p class="hint">MQTTS accepts client certificates that chain to one of these. The gateway's own CA is always trusted.</p>
      {can('read', '/api/certificates/ca') && (
        <div class="actions">
          <Button busy={ca.busy} onClick={() => ca.run(async () => `Saved ${await download('/api/certificates/ca', 'gatewayd-ca.pem')}.`)}>
            Download the gateway CA certificate
          </Button>
          <span class="hint">Install it on devices that connect over MQTTS.</span>
        </div>
      )}
      <ErrorMessage error={ca.error} />
      {ca.done && <Notice kind="success">{ca.done}</Notice>}
      <ErrorMessage error={certs.error} />
      {certs.data && (
        <Table columns={['Issued to', 'Issued by', 'Expires', 'SHA-256', null]} rows={certs.data.length} empty="No trusted certificate.">
          {certs.data.map((c) => (
            <tr key={c.id}>
              <th scope="row">
                {certName(c.issuedTo)}
                {!c.removable && <p class="hint">the gateway CA</p>}
              </th>
              <td>{certName(c.issuedBy)}</td>
              <td>
                <span data-volatile>{formatDate(c.expiresOn)}</span>
              </td>
              <td>
                <span data-volatile>
                  <Code>{c.id.slice(0, 16) + '…'}</Code>
                </span>
              </td>
              <td class="actions">
                <Button class="small" aria-label={`View ${certName(c.issuedTo)}`} onClick={() => setViewing(c)}>
                  View
                </Button>
                {c.removable && (
                  <ConfirmButton
                    class="small"
                    label="Delete"
                    aria-label={`Delete ${certName(c.issuedTo)}`}
                    title="Delete the certificate"
                    question={<p>Stop trusting {certName(c.issuedTo)}? MQTTS clients whose certificates chain only to it are refused from now on.</p>}
                    confirmLabel="Delete certificate"
                    onConfirm={async () => {
                      await api('DELETE', '/api/certificates', { query: { id: c.id } });
                      await certs.reload();
                    }}
                  />
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
      <Dialog open={viewing !== null} wide title={`Certificate ${certName(viewing?.issuedTo)}`} onClose={() => setViewing(null)}>
        {viewing && <CertificateView cert={viewing} />}
        <div class="actions">
          <Button onClick={() => setViewing(null)}>Close</Button>
        </div>
      </Dialog>
      <h3>Add certificates</h3>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void add.run(async () => {
            const added = await api<TrustedCertificate[]>('POST', '/api/certificates', { body: pem });
            setPem('');
            await certs.reload();
            return `Added ${added.map((c) => certName(c.issuedTo)).join('; ')}.`;
          });
        }}
      >
        <TextArea label="PEM certificates" value={pem} onValue={setPem} rows={6} required maxLength={1048576} hint="One or more -----BEGIN CERTIFICATE----- blocks." />
        <FileField
          label="Or read them from a file"
          accept=".pem,.crt,.cer,application/x-pem-file"
          onFile={(file) => {
            if (!file) return;
            void add.run(async () => {
              const text = await file.text();
              setPem(text);
              return `Read ${file.name}: ${plural((text.match(/-----BEGIN CERTIFICATE-----/g) ?? []).length, 'certificate')}.`;
            });
          }}
        />
        <ErrorMessage error={add.error} />
        {add.done && <Notice kind="success">{add.done}</Notice>}
        <Button type="submit" variant="primary" busy={add.busy}>
          Add certificates
        </Button>
      </form>
    </section>
  );
}

export function DevicesPage() {
  const status = useAsync(() => api<RegistryStatus>('GET', '/api/client-registry/status'), []);
  const mayList = can('read', '/api/client-registry');
  const requests = useAsync(() => (mayList ? api<PendingRegistration[]>('GET', '/api/client-registry') : Promise.resolve(undefined)), []);
  const reload = async () => {
    await Promise.all([status.reload(), requests.reload()]);
  };
  // Devices register on their own: the list and the window follow without a reload.
  usePoll(reload, 2000);
  return (
    <section class="page">
      <h1>Devices</h1>
      <ErrorMessage error={status.error} />
      <RegistryWindow status={status.data} reload={reload} />
      {mayList && <Requests requests={requests.data} error={requests.error} reload={requests.reload} />}
      {can('read', '/api/certificates') && <TrustedCertificates />}
    </section>
  );
}

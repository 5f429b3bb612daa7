// Maintenance: the password and username policy, backup (start, progress, download of the
// archive) and restore (upload with progress, then the outcome or the reason it was refused).
// GET /api/maintenance/db is polled while something runs; it stays readable during the swap.
import { useState } from 'preact/hooks';
import { api, download, upload } from '../api.js';
import { ConfirmButton } from '../components/dialog.js';
import { ErrorMessage, Loading, Notice } from '../components/feedback.js';
import { Button, FileField } from '../components/forms.js';
import { formatDate } from '../components/widgets.js';
import { useAction, useAsync, useNow, usePoll } from '../hooks.js';
import { can } from '../session.js';
import type { MaintenanceOperation, MaintenanceStatus, PasswordPolicy } from '../types.js';

function Policies() {
  const password = useAsync(() => api<PasswordPolicy>('GET', '/api/policy/password'), []);
  const username = useAsync(() => api<{ min: number }>('GET', '/api/policy/username'), []);
  const rule = (n: number, one: string, many: string) => (n > 0 ? `at least ${n} ${n === 1 ? one : many}` : `${many}: no rule`);
  return (
    <section class="panel" aria-labelledby="policy-title">
      <h2 id="policy-title">Password and username policy</h2>
      <p class="hint">Checked whenever a password or username is set. Zero turns a rule off (configuration keys policy.password and policy.username).</p>
      <ErrorMessage error={password.error ?? username.error} />
      <div class="split">
        <div>
          <h3>Passwords</h3>
          {password.data ? (
            <ul>
              <li>{rule(password.data.min, 'character', 'characters')}</li>
              <li>{rule(password.data.lower, 'lower-case letter', 'lower-case letters')}</li>
              <li>{rule(password.data.upper, 'upper-case letter', 'upper-case letters')}</li>
              <li>{rule(password.data.numeric, 'digit', 'digits')}</li>
              <li>{rule(password.data.symbol, 'symbol or punctuation character', 'symbols or punctuation characters')}</li>
            </ul>
          ) : (
            !password.error && <Loading />
          )}
        </div>
        <div>
          <h3>Usernames</h3>
          {username.data ? (
            <ul>
              <li>{rule(username.data.min, 'character', 'characters')}</li>
            </ul>
          ) : (
            !username.error && <Loading />
          )}
        </div>
      </div>
    </section>
  );
}

function Outcome(props: { op: MaintenanceOperation | undefined; running: boolean; what: 'backup' | 'restore' }) {
  const now = useNow(1000);
  const op = props.op;
  if (!op) return <p class="hint">No {props.what} yet.</p>;
  const active = props.running && op.succeeded === undefined;
  if (active) {
    const seconds = Math.max(0, Math.round((now - Date.parse(op.startDate)) / 1000));
    return (
      <div>
        <label>
          {props.what === 'backup' ? 'Backup' : 'Restore'} running: {op.statusMessage ?? ''} <span data-volatile>({seconds} s)</span>
          <progress aria-label={`${props.what} in progress`} />
        </label>
      </div>
    );
  }
  const when = <span data-volatile>{formatDate(op.endDate ?? op.startDate)}</span>;
  // The outcome on a line of its own: it names archives and dates (masked in screenshots).
  return op.succeeded ? (
    <Notice kind="success">
      Last {props.what} succeeded ({when}):
      <br />
      <span data-volatile>{op.statusMessage ?? op.id}</span>
    </Notice>
  ) : (
    <div class="alert error" role="alert">
      <strong>Last {props.what} failed</strong> ({when}):
      <br />
      <span class="message">{op.statusMessage ?? op.id}</span>
    </div>
  );
}

export function MaintenancePage() {
  const status = useAsync(() => api<MaintenanceStatus>('GET', '/api/maintenance/db'), []);
  const [file, setFile] = useState<File | null>(null);
  const [progress, setProgress] = useState<number | null>(null);
  const backup = useAction();
  const fetchArchive = useAction();
  const restore = useAction();
  const running = status.data?.running ?? false;
  // Quickly while something runs (progress), slowly otherwise (another administrator may start one).
  usePoll(status.reload, running || restore.busy ? 1000 : 5000);

  return (
    <section class="page">
      <h1>Maintenance</h1>
      <Policies />
      <ErrorMessage error={status.error} />
      <div class="split">
        <section class="panel" aria-labelledby="backup-title">
          <h2 id="backup-title">Backup</h2>
          <p class="hint">A consistent snapshot of the store (users, roles, permissions, tokens, settings) as a .tar.gz archive. The MFA key is not in it: keep the data directory's mfa.key with your backups.</p>
          {status.data && <Outcome op={status.data.backup} running={running} what="backup" />}
          <ErrorMessage error={backup.error} />
          {backup.done && <Notice>{backup.done}</Notice>}
          <div class="actions">
            <Button
              variant="primary"
              busy={backup.busy}
              disabled={running || !can('write', '/api/maintenance/db/backup')}
              onClick={() =>
                backup.run(async () => {
                  const id = await api<string>('POST', '/api/maintenance/db/backup');
                  await status.reload();
                  return `Backup ${id} started.`;
                })
              }
            >
              Start a backup
            </Button>
            <Button
              busy={fetchArchive.busy}
              disabled={running || !status.data?.backup?.succeeded}
              onClick={() => fetchArchive.run(async () => `Saved ${await download('/api/maintenance/db/backup', 'gatewayd-backup.tar.gz')}.`)}
            >
              Download the newest backup
            </Button>
          </div>
          <ErrorMessage error={fetchArchive.error} />
          {fetchArchive.done && <Notice kind="success">{fetchArchive.done}</Notice>}
        </section>

        <section class="panel" aria-labelledby="restore-title">
          <h2 id="restore-title">Restore</h2>
          <p class="hint">Replaces the whole store with the archive's. The archive is checked first; a refused archive changes nothing. Sessions not in the restored store end.</p>
          {status.data && <Outcome op={status.data.restore} running={running} what="restore" />}
          <FileField label="Backup archive (.tar.gz)" accept=".gz,.tgz,application/gzip" onFile={setFile} disabled={restore.busy} />
          {progress !== null && restore.busy && (
            <label>
              Uploading: {Math.round(progress * 100)} %
              <progress max={1} value={progress} aria-label="Upload progress" />
            </label>
          )}
          <ErrorMessage error={restore.error} title="The archive was refused" />
          {restore.done && <Notice>{restore.done}</Notice>}
          <ConfirmButton
            variant="danger"
            label="Restore from this archive"
            disabled={!file || running || restore.busy}
            title="Restore the store"
            question={
              <p>
                Replace every user, role, permission and token with those of <strong>{file?.name}</strong>? The current store is kept as db.before-restore.
              </p>
            }
            confirmLabel="Restore"
            onConfirm={async () => {
              // The dialog closes at once; the upload and its outcome show on the page.
              void restore.run(async () => {
                const form = new FormData();
                form.append('file', file!, file!.name);
                setProgress(0);
                try {
                  await upload('/api/maintenance/db/restore', form, setProgress);
                } finally {
                  await status.reload();
                }
                return 'The archive was accepted; the store is being restored.';
              });
            }}
          />
        </section>
      </div>
    </section>
  );
}

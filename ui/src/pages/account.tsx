// The signed-in user's own account: session, password change (policy rules as one types),
// two-factor authentication (enrol, new backup codes, turn off).
import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { ErrorMessage, Notice } from '../components/feedback.js';
import { Button, TextField } from '../components/forms.js';
import { BackupCodes, MfaEnrollment } from '../components/mfa.js';
import { formatDate, PasswordRules } from '../components/widgets.js';
import { useAction, useAsync } from '../hooks.js';
import { adopt, session } from '../session.js';

function ChangePassword() {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [again, setAgain] = useState('');
  const action = useAction();
  const mismatch = again !== '' && again !== next ? 'The two new passwords differ.' : undefined;
  return (
    <section class="panel" aria-labelledby="pw-title">
      <h2 id="pw-title">Change your password</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (next !== again) return;
          void action.run(async () => {
            await api('PUT', '/api/users/change-password', { body: { password: current, newPassword: next } });
            setCurrent('');
            setNext('');
            setAgain('');
            return 'Your password was changed. Your other sessions were signed out; this one stays.';
          });
        }}
      >
        <TextField label="Current password" type="password" value={current} onValue={setCurrent} autoComplete="current-password" required maxLength={1024} />
        <TextField label="New password" type="password" value={next} onValue={setNext} autoComplete="new-password" required maxLength={1024} />
        <PasswordRules password={next} />
        <TextField label="New password again" type="password" value={again} onValue={setAgain} autoComplete="new-password" required maxLength={1024} invalid={mismatch} />
        <ErrorMessage error={action.error} />
        {action.done && <Notice kind="success">{action.done}</Notice>}
        <Button type="submit" variant="primary" busy={action.busy} disabled={!!mismatch}>
          Change password
        </Button>
      </form>
    </section>
  );
}

/** A second factor asked by disable and regenerate: a code from the app or a backup code. */
function FactorForm(props: { submitLabel: string; variant?: 'danger' | 'primary'; onSubmit: (factor: { otp: string } | { backupCode: string }) => Promise<string | void> }) {
  const [code, setCode] = useState('');
  const [backup, setBackup] = useState(false);
  const action = useAction();
  return (
    <form
      class="inline"
      onSubmit={(e) => {
        e.preventDefault();
        void action.run(async () => {
          const done = await props.onSubmit(backup ? { backupCode: code.trim() } : { otp: code.trim() });
          setCode('');
          return done;
        });
      }}
    >
      <TextField label={backup ? 'Backup code' : 'Code from your app'} value={code} onValue={setCode} required maxLength={64} autoComplete="one-time-code" />
      <Button variant="plain" onClick={() => setBackup(!backup)}>
        {backup ? 'Use an app code' : 'Use a backup code'}
      </Button>
      <Button type="submit" variant={props.variant ?? 'primary'} busy={action.busy}>
        {props.submitLabel}
      </Button>
      <div class="grow">
        <ErrorMessage error={action.error} />
        {action.done && <Notice kind="success">{action.done}</Notice>}
      </div>
    </form>
  );
}

function TwoFactor() {
  const s = session.value!;
  const enrolled = useAsync(() => api<{ isEnrolled: boolean }>('GET', '/api/mfa/isenrolled'), []);
  const [codes, setCodes] = useState<string[] | null>(null);
  // Kept here, not in the form that turned MFA off: that form goes away with the enrolment.
  const [notice, setNotice] = useState<string | null>(null);
  const refresh = async () => {
    await enrolled.reload();
    await adopt(s.token);
  };
  return (
    <section class="panel" aria-labelledby="mfa-title">
      <h2 id="mfa-title">Two-factor authentication</h2>
      <ErrorMessage error={enrolled.error} />
      {notice && <Notice kind="success">{notice}</Notice>}
      {codes ? (
        <BackupCodes codes={codes} username={s.username} doneLabel="I have saved the codes" onDone={() => setCodes(null)} />
      ) : enrolled.data?.isEnrolled ? (
        <>
          <p>
            <span class="badge good">On</span> Your sign-in asks for a code from your authenticator app.
          </p>
          <h3>New backup codes</h3>
          <p class="hint">Replaces all your backup codes.</p>
          <FactorForm
            submitLabel="Make new backup codes"
            onSubmit={async (factor) => setCodes((await api<{ backupCodes: string[] }>('POST', '/api/mfa/regenerate/backupcodes', { body: factor })).backupCodes)}
          />
          <h3>Turn off</h3>
          <FactorForm
            submitLabel="Turn off two-factor authentication"
            variant="danger"
            onSubmit={async (factor) => {
              await api('POST', '/api/mfa/disable', { body: factor });
              setNotice('Two-factor authentication is off.');
              await refresh();
            }}
          />
        </>
      ) : enrolled.data ? (
        <MfaEnrollment
          username={s.username}
          onEnrolled={(list) => {
            setNotice(null);
            setCodes(list);
            void refresh();
          }}
        />
      ) : null}
    </section>
  );
}

export function AccountPage() {
  const s = session.value!;
  return (
    <section class="page">
      <h1>Your account</h1>
      <section class="panel" aria-labelledby="session-title">
        <h2 id="session-title">Session</h2>
        <dl class="facts">
          <dt>Username</dt>
          <dd>{s.username}</dd>
          <dt>Session valid until</dt>
          <dd>
            <span data-volatile>{formatDate(s.expiresAt)}</span>
          </dd>
          <dt>Permissions</dt>
          <dd>{s.permissions.length === 0 ? 'none' : s.permissions.map((p) => `${p.context} ${p.operation} ${p.resource}`).join(' · ')}</dd>
        </dl>
      </section>
      <div class="split">
        <ChangePassword />
        <TwoFactor />
      </div>
    </section>
  );
}

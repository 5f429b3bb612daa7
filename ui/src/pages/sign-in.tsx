// Sign-in: username and password (local and LDAP users alike), the second factor when the user
// is enrolled, the enrolment the policy enforces, and the single sign-on button.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api.js';
import { ErrorMessage, Notice } from '../components/feedback.js';
import { Button, TextField } from '../components/forms.js';
import { BackupCodes, MfaEnrollment } from '../components/mfa.js';
import { useAction } from '../hooks.js';
import { location } from '../router.js';
import { rememberSsoReturn, signIn, signInNotice } from '../session.js';
import type { LoginResult } from '../types.js';

type Step = { kind: 'password' } | { kind: 'mfa'; secret: string } | { kind: 'enroll'; token: string } | { kind: 'codes'; token: string; codes: string[] };

/** Labels the tokens of the UI, so they are recognisable in a user's token list. */
const TOKEN_LABEL = 'web UI';

export function SignInPage() {
  const next = location.value.query.get('next');
  const [step, setStep] = useState<Step>({ kind: 'password' });
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [code, setCode] = useState('');
  const [useBackup, setUseBackup] = useState(false);
  const [sso, setSso] = useState(false);
  const action = useAction();
  const heading = useRef<HTMLHeadingElement>(null);

  useEffect(() => {
    api<{ enabled: boolean }>('GET', '/api/auth/idp', { auth: false })
      .then((r) => setSso(r.enabled))
      .catch(() => setSso(false));
  }, []);
  // A new step moves the focus to its heading; on arrival the username field has it (autofocus).
  const firstStep = useRef(true);
  useEffect(() => {
    if (firstStep.current) firstStep.current = false;
    else heading.current?.focus();
  }, [step.kind]);

  const afterLogin = async (result: LoginResult) => {
    if (result.needsMfa && result.secret) {
      setCode('');
      setStep({ kind: 'mfa', secret: result.secret });
      return;
    }
    if (result.enforceMFAEnrollment && result.token) {
      setStep({ kind: 'enroll', token: result.token });
      return;
    }
    setPassword('');
    await signIn(result, next);
  };

  const notice = signInNotice.value;
  return (
    <main id="main" class="signin" tabIndex={-1}>
      <div class="card">
        <p class="brand" aria-hidden="true">
          gatewayd
        </p>
        {step.kind === 'password' && (
          <form
            onSubmit={(e) => {
              e.preventDefault();
              void action.run(async () => afterLogin(await api<LoginResult>('POST', '/api/login', { auth: false, body: { username, password, label: TOKEN_LABEL } })));
            }}
          >
            <h1 ref={heading} tabIndex={-1}>
              Sign in
            </h1>
            {notice && (notice.kind === 'error' ? <ErrorMessage error={new Error(notice.text)} title="Sign-in" /> : <Notice>{notice.text}</Notice>)}
            <TextField label="Username" value={username} onValue={setUsername} autoComplete="username" required maxLength={128} autoFocus />
            <TextField label="Password" type="password" value={password} onValue={setPassword} autoComplete="current-password" required maxLength={1024} />
            <ErrorMessage error={action.error} />
            <Button type="submit" variant="primary" busy={action.busy}>
              Sign in
            </Button>
            <p class="hint">Directory (LDAP) users sign in here with their directory password.</p>
            {sso && (
              <p class="sso">
                <a class="btn" href="/api/idp/login" onClick={() => rememberSsoReturn(next)}>
                  Sign in with single sign-on
                </a>
              </p>
            )}
          </form>
        )}

        {step.kind === 'mfa' && (
          <form
            onSubmit={(e) => {
              e.preventDefault();
              const factor = useBackup ? { backupCode: code.trim() } : { otp: code.trim() };
              void action.run(async () => afterLogin(await api<LoginResult>('POST', '/api/mfa/login', { auth: false, body: { username, secret: step.secret, ...factor } })));
            }}
          >
            <h1 ref={heading} tabIndex={-1}>
              Two-factor authentication
            </h1>
            <p>{useBackup ? 'Enter one of your backup codes.' : 'Enter the 6-digit code from your authenticator app.'}</p>
            <TextField
              key={useBackup ? 'backup' : 'otp'}
              label={useBackup ? 'Backup code' : 'Authentication code'}
              value={code}
              onValue={setCode}
              inputMode={useBackup ? 'text' : 'numeric'}
              autoComplete="one-time-code"
              required
              maxLength={64}
              autoFocus
            />
            <ErrorMessage error={action.error} />
            <div class="actions">
              <Button type="submit" variant="primary" busy={action.busy}>
                Verify
              </Button>
              <Button variant="plain" onClick={() => (setUseBackup(!useBackup), setCode(''), action.clear())}>
                {useBackup ? 'Use the authenticator app instead' : 'Use a backup code instead'}
              </Button>
              <Button variant="plain" onClick={() => (setStep({ kind: 'password' }), setPassword(''), action.clear())}>
                Start over
              </Button>
            </div>
          </form>
        )}

        {step.kind === 'enroll' && (
          <section>
            <h1 ref={heading} tabIndex={-1}>
              Set up two-factor authentication
            </h1>
            <Notice>Your account requires two-factor authentication before you can use the gateway.</Notice>
            <MfaEnrollment username={username} token={step.token} onEnrolled={(codes) => setStep({ kind: 'codes', token: step.token, codes })} />
          </section>
        )}

        {step.kind === 'codes' && (
          <section>
            <h1 ref={heading} tabIndex={-1}>
              Two-factor authentication is set up
            </h1>
            <BackupCodes
              codes={step.codes}
              username={username}
              doneLabel="Continue to sign in"
              onDone={async () => {
                // The enrolment token opens only the MFA calls: end it and sign in with the new factor.
                await api('POST', '/api/logout', { auth: false, body: { token: step.token } }).catch(() => {});
                setPassword('');
                signInNotice.value = { kind: 'info', text: 'Two-factor authentication is set up. Sign in with your password and a code from your app.' };
                setStep({ kind: 'password' });
              }}
            />
          </section>
        )}
      </div>
    </main>
  );
}

// MFA enrollment (POST /api/mfa/enable, /api/mfa/validate): the otpauth URI as a QR code and as
// a secret to type, the first code, then the backup codes, shown once.
import type { FunctionComponent } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, saveBlob } from '../api.js';
import { useAction } from '../hooks.js';
import { ErrorMessage, Loading } from './feedback.js';
import { Button, TextField } from './forms.js';

type QrProps = { text: string; label: string };

/** The QR encoder is a separate chunk: only enrolling users download it. */
function LazyQr(props: QrProps) {
  const [Qr, setQr] = useState<FunctionComponent<QrProps> | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    import('./qr-code.js').then((m) => setQr(() => m.QrCode), setError);
  }, []);
  if (error) return <ErrorMessage error={error} title="The QR code could not be drawn" />;
  return Qr ? <Qr {...props} /> : <Loading what="the QR code" />;
}

export function BackupCodes(props: { codes: string[]; username: string; onDone: () => void; doneLabel: string }) {
  return (
    <div class="backup-codes">
      <p>
        <strong>Save these backup codes now; they are shown only once.</strong> Each one signs you in once when your authenticator app is not at hand.
      </p>
      <ol class="codes" aria-label="Backup codes">
        {props.codes.map((c) => (
          <li key={c}>
            <code>{c}</code>
          </li>
        ))}
      </ol>
      <div class="actions">
        <Button onClick={() => saveBlob(new Blob([`gatewayd backup codes for ${props.username}\n\n${props.codes.join('\n')}\n`], { type: 'text/plain' }), `gatewayd-backup-codes-${props.username}.txt`)}>
          Download the codes
        </Button>
        <Button variant="primary" onClick={props.onDone}>
          {props.doneLabel}
        </Button>
      </div>
    </div>
  );
}

export function MfaEnrollment(props: { username: string; token?: string; onEnrolled: (codes: string[]) => void }) {
  const [uri, setUri] = useState<string | null>(null);
  const [otp, setOtp] = useState('');
  const start = useAction();
  const confirm = useAction();
  const auth = props.token ? { token: props.token } : {};
  const secret = uri ? (new URL(uri).searchParams.get('secret') ?? '') : '';

  if (!uri) {
    return (
      <div class="enroll">
        <p>Two-factor authentication asks for a 6-digit code from an authenticator app (any TOTP app) after your password.</p>
        <ErrorMessage error={start.error} />
        <Button variant="primary" busy={start.busy} onClick={() => start.run(async () => setUri((await api<{ uri: string }>('POST', '/api/mfa/enable', auth)).uri))}>
          Set up two-factor authentication
        </Button>
      </div>
    );
  }
  return (
    <form
      class="enroll"
      onSubmit={(e) => {
        e.preventDefault();
        void confirm.run(async () => {
          const res = await api<{ backupCodes: string[] }>('POST', '/api/mfa/validate', { ...auth, body: { otp: otp.trim() } });
          props.onEnrolled(res.backupCodes);
        });
      }}
    >
      <ol class="steps">
        <li>
          Scan this QR code with your authenticator app:
          <div data-volatile>
            <LazyQr text={uri} label={`QR code for two-factor authentication of ${props.username}`} />
          </div>
          <p class="hint">Or type this key into the app:</p>
          <p>
            <code class="wrap secret" data-testid="mfa-secret" data-volatile>
              {secret}
            </code>
          </p>
        </li>
        <li>
          <TextField label="Code from the app" value={otp} onValue={setOtp} inputMode="numeric" autoComplete="one-time-code" required maxLength={64} />
        </li>
      </ol>
      <ErrorMessage error={confirm.error} />
      <div class="actions">
        <Button type="submit" variant="primary" busy={confirm.busy}>
          Confirm the code
        </Button>
      </div>
    </form>
  );
}

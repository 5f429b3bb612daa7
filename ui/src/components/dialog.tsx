// Modal dialogs on the native <dialog> element: focus moves into it and is kept there, Escape
// closes it, and focus returns to the control that opened it.
import type { ComponentChildren } from 'preact';
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { ErrorMessage } from './feedback.js';
import { Button } from './forms.js';

export function Dialog(props: { open: boolean; title: string; onClose: () => void; children: ComponentChildren; wide?: boolean }) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (props.open && !dialog.open) dialog.showModal();
    if (!props.open && dialog.open) dialog.close();
  }, [props.open]);
  return (
    <dialog
      ref={ref}
      class={props.wide ? 'wide' : ''}
      aria-labelledby={titleId}
      onClose={() => {
        if (props.open) props.onClose();
      }}
    >
      {props.open && (
        <>
          <h2 id={titleId}>{props.title}</h2>
          {props.children}
        </>
      )}
    </dialog>
  );
}

/**
 * A button that asks before it acts ("Delete user alice?"); the action's error is shown in the
 * dialog, which stays open until the action succeeds or the user cancels.
 */
export function ConfirmButton(props: {
  label: ComponentChildren;
  title: string;
  question: ComponentChildren;
  confirmLabel: string;
  onConfirm: () => Promise<void>;
  variant?: 'danger' | 'primary' | 'plain';
  disabled?: boolean;
  class?: string;
  'aria-label'?: string;
}) {
  const [open, setOpen] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  return (
    <>
      <Button variant={props.variant ?? 'danger'} class={props.class} disabled={props.disabled} aria-label={props['aria-label']} onClick={() => (setError(null), setOpen(true))}>
        {props.label}
      </Button>
      <Dialog open={open} title={props.title} onClose={() => setOpen(false)}>
        <div class="dialog-body">{props.question}</div>
        <ErrorMessage error={error} />
        <div class="actions">
          <Button
            variant={props.variant ?? 'danger'}
            busy={busy}
            onClick={async () => {
              setBusy(true);
              setError(null);
              try {
                await props.onConfirm();
                setOpen(false);
              } catch (err) {
                setError(err);
              } finally {
                setBusy(false);
              }
            }}
          >
            {props.confirmLabel}
          </Button>
          <Button onClick={() => setOpen(false)}>Cancel</Button>
        </div>
      </Dialog>
    </>
  );
}

// Form controls: every control has a visible label tied to it (for/id), an optional hint tied
// by aria-describedby, and never an inline style (the CSP forbids them).
import type { ButtonHTMLAttributes, ComponentChildren, InputHTMLAttributes, TextareaHTMLAttributes } from 'preact';
import { useId } from 'preact/hooks';

interface FieldProps {
  label: ComponentChildren;
  hint?: ComponentChildren;
  /** Shown under the control and announced (aria-invalid). */
  invalid?: string;
}

function Described(props: { id: string; hint?: ComponentChildren; invalid?: string }) {
  return (
    <>
      {props.hint !== undefined && (
        <p class="hint" id={`${props.id}-hint`}>
          {props.hint}
        </p>
      )}
      {props.invalid && (
        <p class="invalid" id={`${props.id}-invalid`}>
          {props.invalid}
        </p>
      )}
    </>
  );
}

function describedBy(id: string, props: FieldProps): string | undefined {
  const ids = [props.hint !== undefined ? `${id}-hint` : '', props.invalid ? `${id}-invalid` : ''].filter(Boolean);
  return ids.length ? ids.join(' ') : undefined;
}

/** The input attributes the pages use (Preact's full input type is a union by `type`). */
interface InputAttributes {
  type?: 'text' | 'password' | 'search' | 'number' | 'email' | 'url' | 'datetime-local';
  name?: string;
  required?: boolean;
  disabled?: boolean;
  readOnly?: boolean;
  autoFocus?: boolean;
  autoComplete?: string;
  inputMode?: 'text' | 'numeric' | 'decimal' | 'search';
  placeholder?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  min?: number;
  max?: number;
  step?: number;
  class?: string;
  onKeyDown?: (e: KeyboardEvent) => void;
}

type InputProps = FieldProps &
  InputAttributes & {
    value: string;
    onValue: (value: string) => void;
  };

export function TextField(props: InputProps) {
  const { label, hint, invalid, value, onValue, class: cls, ...rest } = props;
  const id = useId();
  // Preact types <input> as a union by `type`; these attributes fit every member we use.
  const attributes = {
    ...rest,
    id,
    value,
    onInput: (e: Event) => onValue((e.currentTarget as HTMLInputElement).value),
    'aria-describedby': describedBy(id, props),
    'aria-invalid': invalid ? true : undefined,
  } as InputHTMLAttributes<HTMLInputElement>;
  return (
    <div class={`field ${cls ?? ''}`}>
      <label for={id}>{label}</label>
      <input {...attributes} />
      <Described id={id} hint={hint} invalid={invalid} />
    </div>
  );
}

type AreaProps = FieldProps & Omit<TextareaHTMLAttributes<HTMLTextAreaElement>, 'label' | 'value' | 'onInput'> & {
  value: string;
  onValue: (value: string) => void;
};

export function TextArea(props: AreaProps) {
  const { label, hint, invalid, value, onValue, class: cls, ...rest } = props;
  const id = useId();
  return (
    <div class={`field ${cls ?? ''}`}>
      <label for={id}>{label}</label>
      <textarea
        id={id}
        value={value}
        onInput={(e) => onValue(e.currentTarget.value)}
        aria-describedby={describedBy(id, props)}
        aria-invalid={invalid ? true : undefined}
        spellcheck={false}
        {...rest}
      />
      <Described id={id} hint={hint} invalid={invalid} />
    </div>
  );
}

export function SelectField<T extends string>(
  props: FieldProps & { value: T; onValue: (value: T) => void; options: readonly (T | { value: T; label: string })[]; class?: string; disabled?: boolean; name?: string },
) {
  const id = useId();
  return (
    <div class={`field ${props.class ?? ''}`}>
      <label for={id}>{props.label}</label>
      <select id={id} name={props.name} value={props.value} disabled={props.disabled} onChange={(e) => props.onValue(e.currentTarget.value as T)} aria-describedby={describedBy(id, props)}>
        {props.options.map((o) => {
          const opt = typeof o === 'string' ? { value: o, label: o } : o;
          return (
            <option key={opt.value} value={opt.value}>
              {opt.label}
            </option>
          );
        })}
      </select>
      <Described id={id} hint={props.hint} invalid={props.invalid} />
    </div>
  );
}

export function Checkbox(props: { label: ComponentChildren; checked: boolean; onValue: (checked: boolean) => void; hint?: ComponentChildren; disabled?: boolean; name?: string }) {
  const id = useId();
  return (
    <div class="check">
      <input
        type="checkbox"
        id={id}
        name={props.name}
        checked={props.checked}
        disabled={props.disabled}
        onChange={(e) => props.onValue(e.currentTarget.checked)}
        aria-describedby={props.hint !== undefined ? `${id}-hint` : undefined}
      />
      <label for={id}>{props.label}</label>
      {props.hint !== undefined && (
        <p class="hint" id={`${id}-hint`}>
          {props.hint}
        </p>
      )}
    </div>
  );
}

/** A button that shows it is working and cannot be pressed twice meanwhile. */
export function Button(props: ButtonHTMLAttributes<HTMLButtonElement> & { busy?: boolean; variant?: 'primary' | 'danger' | 'plain' }) {
  const { busy, variant, class: cls, disabled, children, type, ...rest } = props;
  return (
    <button type={type ?? 'button'} class={`btn ${variant ?? ''} ${cls ?? ''}`} disabled={disabled || busy} aria-busy={busy ? true : undefined} {...rest}>
      {children}
    </button>
  );
}

export function FileField(props: { label: ComponentChildren; accept?: string; hint?: ComponentChildren; onFile: (file: File | null) => void; disabled?: boolean }) {
  const id = useId();
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      <input
        id={id}
        type="file"
        accept={props.accept}
        disabled={props.disabled}
        aria-describedby={props.hint !== undefined ? `${id}-hint` : undefined}
        onChange={(e) => props.onFile(e.currentTarget.files?.[0] ?? null)}
      />
      <Described id={id} hint={props.hint} />
    </div>
  );
}

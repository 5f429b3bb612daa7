// What the user is told: API errors with their message (role=alert), results (role=status),
// and an error boundary so a failing page shows its error instead of a blank screen.
import { Component, type ComponentChildren } from 'preact';
import { ApiError, messageOf } from '../api.js';

export function ErrorMessage(props: { error: unknown; title?: string }) {
  if (props.error === null || props.error === undefined) return null;
  const e = props.error;
  const details = e instanceof ApiError ? e.errors : undefined;
  return (
    <div class="alert error" role="alert">
      <strong>{props.title ?? (e instanceof ApiError && e.status ? `Error ${e.status}` : 'Error')}:</strong> <span class="message">{messageOf(e)}</span>
      {details && details.length > 0 && (
        <ul>
          {details.map((d, i) => (
            <li key={i}>
              {d.path ? <code>{d.path}</code> : null} {d.message}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

/** A result or progress line, announced politely to screen readers. */
export function Notice(props: { children: ComponentChildren; kind?: 'info' | 'success' | 'warning' }) {
  return (
    <div class={`alert ${props.kind ?? 'info'}`} role="status">
      {props.children}
    </div>
  );
}

export function Loading(props: { what?: string }) {
  return (
    <p class="loading" role="status">
      Loading{props.what ? ` ${props.what}` : ''}…
    </p>
  );
}

interface BoundaryState {
  error: unknown;
}

/** Catches what a page throws while rendering: the page shows the error, the rest of the UI stays. */
export class ErrorBoundary extends Component<{ children: ComponentChildren; resetKey?: string }, BoundaryState> {
  override state: BoundaryState = { error: null };

  static override getDerivedStateFromError(error: unknown): BoundaryState {
    return { error };
  }

  override componentDidUpdate(prev: { resetKey?: string }): void {
    if (prev.resetKey !== this.props.resetKey && this.state.error) this.setState({ error: null });
  }

  override render() {
    if (this.state.error) {
      return (
        <section class="page">
          <h1>Something went wrong</h1>
          <ErrorMessage error={this.state.error} title="This page failed" />
          <p>
            <button type="button" class="btn" onClick={() => window.location.reload()}>
              Reload the page
            </button>
          </p>
        </section>
      );
    }
    return this.props.children;
  }
}

// Entry of the web UI: take a single sign-on landing or the tab's session, then render.
import { render } from 'preact';
import { App, reportUncaught } from './app.js';
import { restoreSession, takeSsoLanding } from './session.js';
import './styles.css';

window.addEventListener('error', (e) => reportUncaught(e.error ?? e.message));
window.addEventListener('unhandledrejection', (e) => reportUncaught(e.reason));

async function boot(): Promise<void> {
  const root = document.getElementById('app')!;
  try {
    if (!(await takeSsoLanding())) await restoreSession();
  } finally {
    root.textContent = '';
    render(<App />, root);
  }
}

void boot();

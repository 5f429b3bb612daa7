// The shell: navigation by area in groups (nav.tsx), the signed-in user, and the page of the
// current path inside an error boundary. Unknown paths get a "not found" page, never a blank one.
import { signal } from '@preact/signals';
import type { FunctionComponent } from 'preact';
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { messageOf } from './api.js';
import { ErrorBoundary, ErrorMessage, Loading } from './components/feedback.js';
import { AccountPage } from './pages/account.js';
import { AuditPage } from './pages/audit.js';
import { ClientsPage } from './pages/clients.js';
import { DevicesPage } from './pages/devices.js';
import { MaintenancePage } from './pages/maintenance.js';
import { OverviewPage } from './pages/overview.js';
import { PermissionsPage } from './pages/permissions.js';
import { RolePage, RolesPage } from './pages/roles.js';
import { RulesPage } from './pages/rules.js';
import { ServicesPage } from './pages/services.js';
import { SignInPage } from './pages/sign-in.js';
import { UserPage, UsersPage } from './pages/users.js';
import { MainNav } from './nav.js';
import { Link, location, match, navigate } from './router.js';
import { can, session, signOut } from './session.js';

type PageProps = { params: Record<string, string> };

interface Route {
  path: string;
  title: string;
  page?: FunctionComponent<PageProps>;
  /** A page in a chunk of its own, loaded when opened. */
  load?: () => Promise<FunctionComponent<PageProps>>;
  /** In the navigation (under `group`), when the session may read this API path. */
  nav?: { label: string; group?: string; needs?: string };
}

/** The topic explorer is a chunk of its own (mqtt.js): loaded when the page is opened. */
const loadTopics = () => import('./pages/topics.js').then((m) => m.TopicsPage);
/** The mapping page (its tables in words, Sparkplug's nodes): a chunk of its own, so the first page stays small. */
const loadMapping = () => import('./pages/mapping.js').then((m) => m.MappingPage);
/** The service editor too (the YAML parser, mqtt.js for live values). */
const loadServiceEditor = () => import('./pages/service-editor.js').then((m) => m.ServiceEditorPage);

export const routes: Route[] = [
  { path: '/', title: 'Overview', page: OverviewPage, nav: { label: 'Overview' } },
  { path: '/users', title: 'Users', page: UsersPage, nav: { label: 'Users', group: 'Access', needs: '/api/listUsers' } },
  { path: '/users/:id', title: 'User', page: UserPage },
  { path: '/roles', title: 'Roles', page: RolesPage, nav: { label: 'Roles', group: 'Access', needs: '/api/roles/page' } },
  { path: '/roles/:id', title: 'Role', page: RolePage },
  { path: '/permissions', title: 'Permissions', page: PermissionsPage, nav: { label: 'Permissions', group: 'Access', needs: '/api/permissions/page' } },
  { path: '/devices', title: 'Devices', page: DevicesPage, nav: { label: 'Devices', group: 'Access', needs: '/api/client-registry/status' } },
  { path: '/mapping', title: 'Protocol mapping', load: loadMapping, nav: { label: 'Mapping', group: 'Protocols', needs: '/api/connections' } },
  { path: '/services', title: 'Services', page: ServicesPage, nav: { label: 'Services', group: 'Protocols', needs: '/api/services' } },
  { path: '/services/:id', title: 'Service', load: loadServiceEditor },
  { path: '/rules', title: 'Rule sandbox', page: RulesPage, nav: { label: 'Rules', group: 'Protocols', needs: '/api/rule-engine/transform' } },
  { path: '/topics', title: 'Topic explorer', load: loadTopics, nav: { label: 'Topics', group: 'Broker' } },
  { path: '/clients', title: 'MQTT clients', page: ClientsPage, nav: { label: 'Clients', group: 'Broker', needs: '/api/broker/clients' } },
  { path: '/audit', title: 'Audit trail', page: AuditPage, nav: { label: 'Audit', group: 'System', needs: '/api/audit' } },
  { path: '/maintenance', title: 'Maintenance', page: MaintenancePage, nav: { label: 'Maintenance', group: 'System', needs: '/api/maintenance/db' } },
  { path: '/account', title: 'Your account', page: AccountPage },
];

/** Errors nothing else caught (a failed chunk load, a bug in an event handler). */
export const uncaught = signal<string | null>(null);

function findRoute(path: string): { route: Route; params: Record<string, string> } | null {
  for (const route of routes) {
    const params = match(route.path, path);
    if (params) return { route, params };
  }
  return null;
}

/** Renders a lazily loaded page once its chunk has arrived. */
function Lazy(props: { load: () => Promise<FunctionComponent<PageProps>>; params: PageProps['params'] }) {
  const [Page, setPage] = useState<FunctionComponent<PageProps> | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    props.load().then((p) => setPage(() => p), setError);
  }, [props.load]);
  if (error) return <ErrorMessage error={error} title="This page could not be loaded" />;
  if (!Page) return <Loading what="the page" />;
  return <Page params={props.params} />;
}

function NotFound() {
  return (
    <section class="page">
      <h1>Page not found</h1>
      <p>
        There is no page at <code>{location.value.path}</code>. <Link href="/">Go to the overview</Link>.
      </p>
    </section>
  );
}

function Nav() {
  const path = location.value.path;
  const [open, setOpen] = useState(false);
  useEffect(() => setOpen(false), [path]);
  const items = routes.filter((r) => r.nav && (!r.nav.needs || can('read', r.nav.needs) || can('write', r.nav.needs)));
  return (
    <header class="top">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <Link href="/" class="brand">
        gatewayd
      </Link>
      <button type="button" class="btn menu" aria-expanded={open} aria-controls="main-nav" onClick={() => setOpen(!open)}>
        Menu
      </button>
      <MainNav items={items.map((r) => ({ path: r.path, label: r.nav!.label, ...(r.nav!.group ? { group: r.nav!.group } : {}) }))} open={open} />
      <div class="who">
        <Link href="/account" aria-current={path === '/account' ? 'page' : undefined}>
          <span class="sr-only">Your account: </span>
          {session.value?.username}
        </Link>
        <button type="button" class="btn plain" onClick={() => void signOut()}>
          Sign out
        </button>
      </div>
    </header>
  );
}

/** Which release serves the page: a plant checks it after an upgrade (GET /health names the same). */
function Footer() {
  return <footer class="site">gatewayd {__GATEWAYD_VERSION__}</footer>;
}

export function App() {
  const loc = location.value;
  const signed = session.value !== null;
  const main = useRef<HTMLElement>(null);

  // Guards: pages need a session; the sign-in page is for the signed-out. A layout effect: the
  // address is right before anything is painted.
  useLayoutEffect(() => {
    if (!signed && loc.path !== '/signin') navigate(`/signin?next=${encodeURIComponent(loc.path + (window.location.search || ''))}`, { replace: true });
  }, [signed, loc.path]);

  const found = findRoute(loc.path);
  useEffect(() => {
    document.title = loc.path === '/signin' ? 'Sign in · gatewayd' : `${found?.route.title ?? 'Not found'} · gatewayd`;
  }, [loc.path]);
  // A new page: move focus to it, so keyboard and screen-reader users start there.
  const first = useRef(true);
  useLayoutEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    main.current?.focus();
  }, [loc.path]);

  if (loc.path === '/signin' || !signed) {
    return (
      <>
        <ErrorBoundary resetKey="signin">
          <SignInPage />
        </ErrorBoundary>
        <Footer />
      </>
    );
  }
  const Page = found?.route.page;
  const load = found?.route.load;
  return (
    <>
      <Nav />
      {uncaught.value && (
        <div class="alert error banner" role="alert">
          <strong>Error:</strong> <span class="message">{uncaught.value}</span>{' '}
          <button type="button" class="btn plain" onClick={() => (uncaught.value = null)}>
            Dismiss
          </button>
        </div>
      )}
      <main id="main" ref={main} tabIndex={-1}>
        <ErrorBoundary resetKey={loc.path}>
          {found && Page ? <Page params={found.params} /> : found && load ? <Lazy load={load} params={found.params} /> : <NotFound />}
        </ErrorBoundary>
      </main>
      <Footer />
    </>
  );
}

export function reportUncaught(err: unknown): void {
  uncaught.value = messageOf(err);
}

// The main navigation, grouped so that it fits a laptop (1366 px) on one line: Overview, then
// Access, Protocols, Broker and System, each a disclosure (a button that shows its pages; WAI-ARIA
// "disclosure navigation", no menu roles). One group is open at a time; Escape closes it and gives
// the focus back to its button; a click elsewhere or leaving it with Tab closes it. A group of one
// page the user may open is that page's link. Behind the Menu button (tablets, phones) every group
// shows its pages under its name.
import { useEffect, useRef, useState } from 'preact/hooks';
import { Link, location } from './router.js';

export interface NavItem {
  path: string;
  label: string;
  group?: string;
}

const isCurrent = (itemPath: string, path: string) => (itemPath === '/' ? path === '/' : path === itemPath || path.startsWith(`${itemPath}/`));

function NavLink(props: { item: NavItem; path: string; onNavigate?: () => void }) {
  const current = isCurrent(props.item.path, props.path);
  return (
    <Link href={props.item.path} aria-current={current ? 'page' : undefined} onClick={props.onNavigate}>
      {props.item.label}
    </Link>
  );
}

function Group(props: { name: string; items: NavItem[]; path: string; open: boolean; onToggle: (open: boolean) => void }) {
  const id = `nav-${props.name.toLowerCase()}`;
  const button = useRef<HTMLButtonElement>(null);
  const current = props.items.some((i) => isCurrent(i.path, props.path));
  return (
    <li
      class={`group${current ? ' current' : ''}`}
      onKeyDown={(e) => {
        if (e.key === 'Escape' && props.open) {
          props.onToggle(false);
          button.current?.focus();
        }
      }}
      onFocusOut={(e) => {
        const next = e.relatedTarget as Node | null;
        if (props.open && next && !(e.currentTarget as HTMLElement).contains(next)) props.onToggle(false);
      }}
    >
      <button ref={button} type="button" class="group-toggle" aria-expanded={props.open} aria-controls={id} onClick={() => props.onToggle(!props.open)}>
        {props.name}
        {current && <span class="sr-only"> (the current page is here)</span>}
      </button>
      <span class="group-name" aria-hidden="true">
        {props.name}
      </span>
      <ul id={id} class={props.open ? 'open' : ''} aria-label={props.name}>
        {props.items.map((i) => (
          <li key={i.path}>
            <NavLink item={i} path={props.path} onNavigate={() => props.onToggle(false)} />
          </li>
        ))}
      </ul>
    </li>
  );
}

/** The items in order; consecutive items of a group form it. */
export function MainNav(props: { items: NavItem[]; open: boolean }) {
  const path = location.value.path;
  const [openGroup, setOpenGroup] = useState<string | null>(null);
  const nav = useRef<HTMLElement>(null);
  useEffect(() => setOpenGroup(null), [path]);
  useEffect(() => {
    if (openGroup === null) return;
    const outside = (e: PointerEvent) => {
      if (nav.current && !nav.current.contains(e.target as Node)) setOpenGroup(null);
    };
    document.addEventListener('pointerdown', outside);
    return () => document.removeEventListener('pointerdown', outside);
  }, [openGroup]);

  const entries: ({ item: NavItem } | { group: string; items: NavItem[] })[] = [];
  for (const item of props.items) {
    const last = entries[entries.length - 1];
    if (item.group && last && 'group' in last && last.group === item.group) last.items.push(item);
    else entries.push(item.group ? { group: item.group, items: [item] } : { item });
  }
  return (
    <nav id="main-nav" aria-label="Main" class={props.open ? 'open' : ''} ref={nav}>
      <ul>
        {entries.map((e) =>
          'item' in e || e.items.length === 1 ? (
            <li key={'item' in e ? e.item.path : e.items[0]!.path}>
              <NavLink item={'item' in e ? e.item : e.items[0]!} path={path} />
            </li>
          ) : (
            <Group key={e.group} name={e.group} items={e.items} path={path} open={openGroup === e.group} onToggle={(o) => setOpenGroup(o ? e.group : null)} />
          ),
        )}
      </ul>
    </nav>
  );
}

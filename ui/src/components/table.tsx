// The pieces every list page shares: its heading with the "new" link, the search by the API's
// exact-match filter, and a table in a box that scrolls sideways on narrow screens.
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { Link } from '../router.js';
import { Button, TextField } from './forms.js';

export function ListHeader(props: { title: string; create?: { href: string; label: string } }) {
  return (
    <div class="row">
      <h1 class="grow">{props.title}</h1>
      {props.create && (
        <Link class="btn primary" href={props.create.href}>
          {props.create.label}
        </Link>
      )}
    </div>
  );
}

/** A search form: Find applies the text (trimmed), Show all clears it. Extra controls go in `children`. */
export function ExactSearch(props: { label: string; maxLength: number; applied: string; onApply: (value: string) => void; hint?: string; children?: ComponentChildren }) {
  const [text, setText] = useState(props.applied);
  return (
    <form
      class="inline"
      role="search"
      onSubmit={(e) => {
        e.preventDefault();
        props.onApply(text.trim());
      }}
    >
      <TextField label={props.label} type="search" value={text} onValue={setText} maxLength={props.maxLength} hint={props.hint} />
      <Button type="submit">Find</Button>
      {props.applied && <Button onClick={() => (setText(''), props.onApply(''))}>Show all</Button>}
      {props.children}
    </form>
  );
}

/**
 * `columns`: header texts; null for the (unlabelled) column of row actions. `region`: a wide
 * table that may scroll sideways on a tablet is a named region reachable by keyboard.
 */
export function Table(props: { columns: (string | null)[]; caption?: ComponentChildren; empty: ComponentChildren; rows: number; children: ComponentChildren; region?: string }) {
  return (
    <div class="table-wrap" {...(props.region ? { role: 'region', 'aria-label': props.region, tabIndex: 0 } : {})}>
      <table>
        {props.caption && <caption>{props.caption}</caption>}
        <thead>
          <tr>
            {props.columns.map((c, i) => (
              <th scope="col" key={i}>
                {c ?? <span class="sr-only">Actions</span>}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {props.rows === 0 && (
            <tr>
              <td colSpan={props.columns.length}>{props.empty}</td>
            </tr>
          )}
          {props.children}
        </tbody>
      </table>
    </div>
  );
}

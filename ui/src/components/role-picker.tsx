// Choosing shared roles one page at a time (GET /api/roles/page?isShared=true): the browser
// never loads the whole role table, which holds a private role per user.
import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { useAsync } from '../hooks.js';
import type { Pagination, RolePageItem } from '../types.js';
import { ErrorMessage } from './feedback.js';
import { Button, Checkbox, TextField } from './forms.js';
import { Pager } from './widgets.js';

export interface RoleRef {
  id: string;
  name: string;
}

export async function sharedRolesPage(page: number, rows: number, name?: string): Promise<{ roles: RolePageItem[]; pagination: Pagination }> {
  return api('GET', '/api/roles/page', { query: { rowsPerPage: rows, pageNumber: page, isShared: true, names: name ? [name] : undefined } });
}

export function RolePicker(props: { selected: RoleRef[]; onChange: (roles: RoleRef[]) => void; legend: string }) {
  const [page, setPage] = useState(1);
  const [search, setSearch] = useState('');
  const [applied, setApplied] = useState('');
  const roles = useAsync(() => sharedRolesPage(page, 10, applied || undefined), [page, applied]);
  const chosen = new Set(props.selected.map((r) => r.id));
  const find = () => {
    setPage(1);
    setApplied(search.trim());
  };
  const toggle = (role: RoleRef, on: boolean) => props.onChange(on ? [...props.selected, role] : props.selected.filter((r) => r.id !== role.id));

  return (
    <fieldset class="role-picker">
      <legend>{props.legend}</legend>
      <p class="hint">
        Selected: {props.selected.length === 0 ? 'none' : props.selected.map((r) => r.name).join(', ')}
      </p>
      {/* Not a <form>: the picker sits inside the forms of users and devices. */}
      <div class="inline" role="search">
        <TextField
          label="Find a shared role by exact name"
          value={search}
          onValue={setSearch}
          type="search"
          onKeyDown={(e: KeyboardEvent) => {
            if (e.key === 'Enter') {
              e.preventDefault();
              find();
            }
          }}
        />
        <Button onClick={find}>Find</Button>
        {applied && <Button onClick={() => (setSearch(''), setApplied(''), setPage(1))}>Show all</Button>}
      </div>
      <ErrorMessage error={roles.error} />
      {roles.data && roles.data.roles.length === 0 && <p class="hint">No shared role{applied ? ` named “${applied}”` : ''}.</p>}
      <div class="choices">
        {roles.data?.roles.map((r) => (
          <Checkbox key={r.id} label={r.name} checked={chosen.has(r.id)} onValue={(on) => toggle({ id: r.id, name: r.name }, on)} />
        ))}
      </div>
      <Pager pagination={roles.data?.pagination} onPage={setPage} what="shared roles" />
    </fieldset>
  );
}

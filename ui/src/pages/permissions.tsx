// Permissions by resource (GET /api/permissions/page): where each resource is granted, to which
// role or user, with which operation. ?ids=… narrows it to the resources of given permissions
// ("where used" links from roles and users).
import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { ErrorMessage, Loading } from '../components/feedback.js';
import { Button, TextField } from '../components/forms.js';
import { describeResource, operations } from '../components/permission-editor.js';
import { Pager } from '../components/widgets.js';
import { useAsync } from '../hooks.js';
import { Link, location, navigate } from '../router.js';
import type { Pagination, PermissionPageItem } from '../types.js';

const ROWS = 20;
const operationLabel = (op: string) => operations.find((o) => o.value === op)?.label ?? op;

export function PermissionsPage() {
  const idsParam = location.value.query.get('ids') ?? '';
  const ids = idsParam.split(',').map((s) => s.trim()).filter(Boolean);
  const [page, setPage] = useState(1);
  const [idInput, setIdInput] = useState(idsParam);
  const perms = useAsync(
    () => api<{ permissions: PermissionPageItem[]; pagination: Pagination }>('GET', '/api/permissions/page', { query: { rowsPerPage: ROWS, pageNumber: page, ids: ids.length ? ids : undefined } }),
    [page, idsParam],
  );
  return (
    <section class="page">
      <h1>Permissions</h1>
      <p class="hint">Every resource granted by some role, with the roles and users that hold it.</p>
      <form
        class="inline"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          setPage(1);
          const q = idInput.trim();
          navigate(q ? `/permissions?ids=${encodeURIComponent(q)}` : '/permissions', { replace: true });
        }}
      >
        <TextField label="Permission ids (comma-separated)" value={idInput} onValue={setIdInput} maxLength={10000} hint="Shows where the resources of these permissions are used." />
        <Button type="submit">Show</Button>
        {ids.length > 0 && (
          <Button onClick={() => (setIdInput(''), setPage(1), navigate('/permissions', { replace: true }))}>Show all</Button>
        )}
      </form>
      <ErrorMessage error={perms.error} />
      {!perms.data && !perms.error && <Loading what="permissions" />}
      {perms.data && (
        <>
          <div class="table-wrap">
            <table>
              <caption>{ids.length ? 'Resources of the given permissions' : 'Resources, sorted'}</caption>
              <thead>
                <tr>
                  <th scope="col">Resource</th>
                  <th scope="col">Context</th>
                  <th scope="col">Granted to</th>
                </tr>
              </thead>
              <tbody>
                {perms.data.permissions.length === 0 && (
                  <tr>
                    <td colSpan={3}>No permission.</td>
                  </tr>
                )}
                {perms.data.permissions.map((p) => (
                  <tr key={`${p.context} ${p.resource}`}>
                    <th scope="row">
                      <code>{p.resource}</code>
                      <p class="hint">{describeResource(p.resource, p.context).text}</p>
                    </th>
                    <td>{p.context}</td>
                    <td>
                      <ul class="plain-list">
                        {p.usage.map((u) => (
                          <li key={`${u.roleId}-${u.operation}`}>
                            {operationLabel(u.operation)} ·{' '}
                            {u.isRoleShared ? (
                              <>
                                role <Link href={`/roles/${encodeURIComponent(u.roleId)}`}>{u.roleName}</Link>
                              </>
                            ) : (
                              <>
                                user {u.userId ? <Link href={`/users/${encodeURIComponent(u.userId)}`}>{u.username}</Link> : u.roleName} (direct)
                              </>
                            )}
                          </li>
                        ))}
                      </ul>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <Pager pagination={perms.data.pagination} onPage={setPage} what="resources" />
        </>
      )}
    </section>
  );
}

// Permissions by resource (GET /api/permissions/page): where each resource is granted, to which
// role or user, with which operation. ?ids=… narrows it to the resources of given permissions
// ("where used" links from roles and users).
import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { ErrorMessage, Loading } from '../components/feedback.js';
import { describeResource, operations } from '../components/permission-editor.js';
import { ExactSearch, Table } from '../components/table.js';
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
  const perms = useAsync(
    () => api<{ permissions: PermissionPageItem[]; pagination: Pagination }>('GET', '/api/permissions/page', { query: { rowsPerPage: ROWS, pageNumber: page, ids: ids.length ? ids : undefined } }),
    [page, idsParam],
  );
  return (
    <section class="page">
      <h1>Permissions</h1>
      <p class="hint">Every resource granted by some role, with the roles and users that hold it.</p>
      <ExactSearch
        key={idsParam}
        label="Permission ids (comma-separated)"
        hint="Shows where the resources of these permissions are used."
        maxLength={10000}
        applied={idsParam}
        onApply={(v) => {
          setPage(1);
          navigate(v ? `/permissions?ids=${encodeURIComponent(v)}` : '/permissions', { replace: true });
        }}
      />
      <ErrorMessage error={perms.error} />
      {!perms.data && !perms.error && <Loading what="permissions" />}
      {perms.data && (
        <>
          <Table caption={ids.length ? 'Resources of the given permissions' : 'Resources, sorted'} columns={['Resource', 'Context', 'Granted to']} rows={perms.data.permissions.length} empty="No permission.">
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
          </Table>
          <Pager pagination={perms.data.pagination} onPage={setPage} what="resources" />
        </>
      )}
    </section>
  );
}

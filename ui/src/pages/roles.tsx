export function RolesPage() {
  return <section class="page"><h1>Roles</h1></section>;
}
export function RolePage() {
  return <section class="page"><h1>Role</h1></section>;
}

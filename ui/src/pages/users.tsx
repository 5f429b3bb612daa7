export function UsersPage() {
  return <section class="page"><h1>Users</h1></section>;
}
export function UserPage() {
  return <section class="page"><h1>User</h1></section>;
}

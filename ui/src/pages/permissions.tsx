export function PermissionsPage() {
  return <section class="page"><h1>PermissionsPage</h1></section>;
}

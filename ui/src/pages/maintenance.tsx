export function MaintenancePage() {
  return <section class="page"><h1>MaintenancePage</h1></section>;
}

export function DevicesPage() {
  return <section class="page"><h1>DevicesPage</h1></section>;
}

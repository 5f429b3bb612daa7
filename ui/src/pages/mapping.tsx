export function MappingPage() {
  return <section class="page"><h1>MappingPage</h1></section>;
}

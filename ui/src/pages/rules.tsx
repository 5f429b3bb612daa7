export function RulesPage() {
  return <section class="page"><h1>RulesPage</h1></section>;
}

// Topic rules every broker front end applies before asking the permission engine (docs/design.md §4):
// the embedded broker's publish path and a cluster's publish hook (src/broker-hooks).

/** `$SYS` and `$SYS/...`: reserved for the broker, nobody publishes there. */
export function isSysTopic(topic: string): boolean {
  return topic.startsWith('$SYS') && (topic.length === 4 || topic.charCodeAt(4) === 47); // '/'
}

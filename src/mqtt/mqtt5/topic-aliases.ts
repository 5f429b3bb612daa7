// Outbound topic aliases (MQTT 5 §3.3.2.3.4): a client that announces a Topic Alias Maximum in
// its CONNECT gets, for its first PUBLISH on a topic, the topic with a new alias, and from then on
// an empty topic with that alias. Exists because aedes 2.0.0-beta.1 resolves the aliases clients
// send (inbound) but never assigns one towards a client. Aliases are per connection [MQTT-3.3.2-7];
// at most min(client's maximum, mqtt.topicAliasMaximum) topics get one (the first ones seen,
// no eviction: devices publish to a fixed set of topics), the others go with their topic.

/** A PUBLISH as aedes writes it. */
export interface AliasablePublish {
  cmd: string;
  topic?: unknown;
  properties?: Record<string, unknown>;
}

export class OutboundTopicAliases {
  private readonly aliases = new Map<string, number>();

  constructor(private readonly max: number) {}

  /**
   * The packet to write: with the alias of its topic (known: empty topic; new: topic and alias),
   * or unchanged. `commit` makes a new alias count; call it only when the packet is written.
   */
  apply<P extends AliasablePublish>(packet: P): { packet: P; commit: (() => void) | undefined } {
    const topic = packet.topic;
    if (typeof topic !== 'string' || topic.length === 0) return { packet, commit: undefined };
    const known = this.aliases.get(topic);
    if (known !== undefined) return { packet: aliased(packet, '', known), commit: undefined };
    if (this.aliases.size >= this.max) return { packet, commit: undefined };
    const alias = this.aliases.size + 1;
    return { packet: aliased(packet, topic, alias), commit: () => this.aliases.set(topic, alias) };
  }
}

/** A copy: aedes shares the properties object between the copies of one message. */
function aliased<P extends AliasablePublish>(packet: P, topic: string, alias: number): P {
  return { ...packet, topic, properties: { ...packet.properties, topicAlias: alias } };
}

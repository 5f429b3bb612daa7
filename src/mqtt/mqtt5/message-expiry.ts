// Message Expiry Interval (MQTT 5 §3.3.2.3.3) of messages the broker holds for a while. aedes
// 2.0.0-beta.1 records the absolute expiry (`messageExpiry`, ms) on every publish that has an
// interval, drops expired messages when it replays an offline queue or sends retained messages,
// and updates the interval there; these helpers do the same for the messages gatewayd itself holds
// (flow-control.ts) and for the sweep of expired retained messages (persistence/).

/** A message that may carry aedes' absolute expiry. */
export interface ExpiringMessage {
  messageExpiry?: number;
  properties?: Record<string, unknown>;
}

export function isExpired(message: ExpiringMessage, now: number): boolean {
  return message.messageExpiry !== undefined && message.messageExpiry <= now;
}

/**
 * The message with its Message Expiry Interval set to the time it has left, in whole seconds
 * rounded up [MQTT-3.3.2-6]; the same object when it does not expire. The properties object is
 * replaced, never changed: aedes shares it between the copies of one message.
 */
export function withRemainingExpiry<M extends ExpiringMessage>(message: M, now: number): M {
  if (message.messageExpiry === undefined) return message;
  const seconds = Math.max(1, Math.ceil((message.messageExpiry - now) / 1000));
  return { ...message, properties: { ...message.properties, messageExpiryInterval: seconds } };
}

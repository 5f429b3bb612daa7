// The two places aedes meets the retained-first gate (retained-first.ts): a SUBSCRIBE read opens
// a client's gate, the end of the retained messages aedes streams for it closes it again.
import type { Aedes, Client } from 'aedes';
import type { Readable, Writable } from 'node:stream';
import { stateOf, type GatewayClient } from './client-state.js';
import { RetainedFirst, type DeliveringClient } from './retained-first.js';

/** At a SUBSCRIBE the client reads (inbound-packets.ts): opens its gate. */
export function subscribeRead(client: GatewayClient, filters: string[]): void {
  const st = client.gatewayd;
  if (st === undefined) return;
  (st.retainedFirst ??= new RetainedFirst(client as unknown as DeliveringClient)).subscribing(filters);
}

interface RetainedSource {
  createRetainedStreamCombi(patterns: string[]): Readable;
}

/**
 * Closes the gates: aedes emits 'subscribe' right before it asks its persistence for the retained
 * messages of that SUBSCRIBE (or asks nothing: none of its subscriptions wants them). The gate
 * opens again for what comes after the end of the pipe aedes feeds those messages into.
 */
export function installRetainedFirst(aedes: Aedes): void {
  const persistence = (aedes as unknown as { persistence: RetainedSource }).persistence;
  let answering: RetainedFirst | undefined;
  aedes.on('subscribe', (_subs: unknown, client: Client) => {
    const gate = stateOf(client)?.retainedFirst;
    if (gate === undefined) return;
    answering = gate;
    queueMicrotask(() => {
      if (answering !== gate) return;
      answering = undefined;
      gate.retainedSent();
    });
  });
  const stream = persistence.createRetainedStreamCombi.bind(persistence);
  persistence.createRetainedStreamCombi = (patterns) => {
    const source = stream(patterns);
    const gate = answering;
    answering = undefined;
    if (gate === undefined) return source;
    const pipe = source.pipe.bind(source);
    source.pipe = (<T extends NodeJS.WritableStream>(destination: T, options?: { end?: boolean }): T => {
      let sent = false;
      const done = () => {
        if (sent) return;
        sent = true;
        gate.retainedSent();
      };
      const writable = destination as unknown as Writable;
      writable.once('finish', done);
      writable.once('close', done);
      writable.once('error', done);
      return pipe(destination, options);
    }) as typeof source.pipe;
    return source;
  };
}

import { createRequire } from 'node:module';

/**
 * Disabled `debug` instances cost the broker nothing again (docs/mqtt-broker.md).
 *
 * mqtt-packet calls its `debug` instances about 20 times per MQTT message, formatting nothing
 * while DEBUG does not name them. In a process of its own, V8 inlines those calls into the parser
 * and they vanish; in the daemon, Express and the other libraries create dozens of `debug`
 * instances, each with its own hidden class, so the shared `debug()` code is no longer inlined:
 * each call allocates its arguments and costs 30 instead of 12 ns (2.5 KB of garbage and several
 * percent of the broker's CPU per delivered message, measured against bare aedes). So, before
 * any library loads it, the `debug` module mqtt-packet uses is wrapped: a namespace that DEBUG
 * does not enable gets one shared function that does nothing; an enabled one gets a real
 * instance, as before. DEBUG is read at start, as `debug` itself reads it; an instance made while
 * disabled stays disabled if `debug.enable()` is called later in the process.
 */
export function quietDisabledDebug(): boolean {
  try {
    // The copy of `debug` that mqtt-packet resolves (aedes' mqtt-packet, as outbound-packets.ts finds it).
    const fromHere = createRequire(import.meta.url);
    const fromAedes = createRequire(fromHere.resolve('aedes'));
    const fromMqttPacket = createRequire(fromAedes.resolve('mqtt-packet'));
    const path = fromMqttPacket.resolve('debug');
    const debug = fromMqttPacket(path) as DebugFactory;
    const cached = fromMqttPacket.cache[path];
    if (!cached || typeof debug !== 'function' || typeof debug.enabled !== 'function') return false;
    if ((debug as { quieted?: boolean }).quieted) return true;
    const off = disabledInstance();
    const factory = Object.assign((namespace: string) => (debug.enabled(namespace) ? debug(namespace) : off), debug, { quieted: true });
    // Libraries that call `require('debug').debug(...)` or `.default(...)` get the same.
    factory.debug = factory;
    factory.default = factory;
    cached.exports = factory;
    return true;
  } catch {
    return false; // a changed dependency layout: debug keeps its own behaviour
  }
}

interface DebugFactory {
  (namespace: string): unknown;
  enabled(namespace: string): boolean;
  debug?: unknown;
  default?: unknown;
}

/** One function for every disabled namespace, with the properties libraries read or set on an instance. */
function disabledInstance(): (...args: unknown[]) => void {
  const off = Object.assign(function debugDisabled(): void {}, {
    enabled: false,
    namespace: '',
    useColors: false,
    color: 0,
    diff: 0,
    log: (): void => {},
    destroy: (): boolean => true,
    extend: (): unknown => off,
  });
  return off;
}

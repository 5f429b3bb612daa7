import type { Request } from 'express';
import { BadRequestError, ConflictError, NotFoundError } from '../../errors/errors.js';
import type { Broker, BrokerAdmin, LiveClient, StoredSession } from '../../mqtt/index.js';
import type { RouteModule } from '../create-http-app.js';
import { queryBool, queryInt, queryString } from './query.js';

/** A page's continuation: where the next one starts, opaque to clients. */
const encodeCursor = (next: string) => Buffer.from(next, 'utf8').toString('base64url');
function decodeCursor(text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  const value = Buffer.from(text, 'base64url').toString('utf8');
  if (encodeCursor(value) !== text) throw new BadRequestError('cursor is not one this API answered (use nextCursor of the previous page)');
  return value;
}

/** A filter as MQTT defines one: `+` a whole level, `#` the whole last level. */
function checkFilter(filter: string): void {
  const levels = filter.split('/');
  levels.forEach((level, i) => {
    if ((level.includes('+') && level !== '+') || (level.includes('#') && (level !== '#' || i !== levels.length - 1))) {
      throw new BadRequestError(`filter is not an MQTT topic filter: "${level}" (+ and # stand for whole levels, # only at the end)`);
    }
  });
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/**
 * The broker's clients, sessions and retained messages for operators (gatewayd additions, docs/mqtt-broker.md
 * "Broker clients and sessions"): paged server-side with an opaque cursor; a disconnect, a
 * deleted session and a cleared retained message are audited by the broker.
 */
export function brokerAdminRoutes(deps: { broker: () => Broker | undefined; usernameOf: (userId: string) => string | undefined }): RouteModule {
  const admin = (): BrokerAdmin => {
    const broker = deps.broker();
    if (!broker) throw new ConflictError('the MQTT broker is disabled (mqtt.enabled is false)');
    return broker.admin();
  };
  /** Sessions and retained messages are read from the store: without the LMDB persistence there is nothing to page. */
  const stored = (): BrokerAdmin => {
    const a = admin();
    if (!a.stored()) throw new ConflictError('the broker keeps no state in the store (mqtt.persistence.enabled is false)');
    return a;
  };
  const query = (req: Request) => req.query as Record<string, unknown>;
  const limitOf = (req: Request) => queryInt(query(req).limit, 50);
  const clientView = (c: LiveClient) => ({ ...c, connectedSince: iso(c.connectedSince) });
  const sessionView = (s: StoredSession) => {
    const { owner, expiresAt, ...rest } = s;
    const username = owner ? deps.usernameOf(owner) : undefined;
    return { ...rest, ...(username !== undefined ? { username } : {}), expiresAt: iso(expiresAt) };
  };
  const page = <T, V>(p: { items: T[]; next?: string }, map: (t: T) => V) => ({ items: p.items.map(map), ...(p.next !== undefined ? { nextCursor: encodeCursor(p.next) } : {}) });

  return (r) => {
    r.get('/api/broker/clients', (req, res) => {
      const q = query(req);
      const after = decodeCursor(queryString(q.cursor));
      const prefix = queryString(q.prefix);
      const username = queryString(q.username);
      res.json(page(admin().clients({ limit: limitOf(req), ...(after !== undefined ? { after } : {}), ...(prefix ? { prefix } : {}), ...(username !== undefined ? { username } : {}) }), clientView));
    });

    r.get('/api/broker/clients/:clientId', (req, res) => {
      const detail = admin().client(String(req.params.clientId));
      if (!detail) throw new NotFoundError('Client not connected');
      res.json(clientView(detail));
    });

    r.delete('/api/broker/clients/:clientId', async (req, res) => {
      if (!(await admin().disconnect(String(req.params.clientId)))) throw new NotFoundError('Client not connected');
      res.status(204).end();
    });

    r.get('/api/broker/sessions', (req, res) => {
      const q = query(req);
      const after = decodeCursor(queryString(q.cursor));
      const prefix = queryString(q.prefix);
      const connected = queryBool(q.connected);
      res.json(page(stored().sessions({ limit: limitOf(req), ...(after !== undefined ? { after } : {}), ...(prefix ? { prefix } : {}), ...(connected !== undefined ? { connected } : {}) }), sessionView));
    });

    r.delete('/api/broker/sessions/:clientId', async (req, res) => {
      const outcome = await stored().deleteSession(String(req.params.clientId));
      if (outcome === 'missing') throw new NotFoundError('Session not found');
      if (outcome === 'connected') throw new ConflictError('the client is connected: disconnect it first (DELETE /api/broker/clients/{clientId}), or let it end its session');
      res.status(204).end();
    });

    r.get('/api/broker/retained', (req, res) => {
      const q = query(req);
      const filter = queryString(q.filter) ?? '#';
      checkFilter(filter);
      const after = decodeCursor(queryString(q.cursor));
      res.json(page(stored().retained({ filter, limit: limitOf(req), ...(after !== undefined ? { after } : {}) }), (m) => m));
    });

    r.delete('/api/broker/retained', async (req, res) => {
      const topic = queryString(query(req).topic)!;
      if (/[+#]/.test(topic)) throw new BadRequestError('topic is one topic, without wildcards');
      if (!(await stored().deleteRetained(topic))) throw new NotFoundError('Retained message not found');
      res.status(204).end();
    });
  };
}

// An edge's requests to the site's centrals: one of a list of URLs (the first that answers;
// the next one when it does not), HTTP or HTTPS with the site's CA. The answers that matter are
// signed (src/site/signing.ts), so a wrong URL cannot feed an edge; TLS keeps the join's secrets
// and the records' hashes off the wire.
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { readFileSync } from 'node:fs';

export interface SiteResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** Which central answered. */
  url: string;
}

export class CentralUnreachableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CentralUnreachableError';
  }
}

export function createSiteClient(deps: { urls: string[]; caFile: string; maxBodyBytes?: number }) {
  const ca = deps.caFile ? readFileSync(deps.caFile, 'utf8') : undefined;
  const maxBody = deps.maxBodyBytes ?? 512 * 1024 * 1024;
  /** Index of the central that answered last: asked first next time. */
  let current = 0;
  const inFlight = new Set<{ destroy(): void }>();

  function once(base: string, path: string, options: { method: string; headers: Record<string, string>; body?: Buffer; timeoutMs: number }): Promise<SiteResponse> {
    const url = new URL(path, base.endsWith('/') ? base : `${base}/`);
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise((resolve, reject) => {
      const req = send(
        url,
        {
          method: options.method,
          headers: { accept: 'application/json', ...(options.body ? { 'content-type': 'application/json', 'content-length': String(options.body.length) } : {}), ...options.headers },
          ...(ca ? { ca } : {}),
          timeout: options.timeoutMs,
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            size += c.length;
            if (size > maxBody) req.destroy(new Error('answer too large'));
            else chunks.push(c);
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), url: base }));
          res.on('error', reject);
        },
      );
      const handle = { destroy: () => req.destroy(new Error('stopped')) };
      inFlight.add(handle);
      req.on('close', () => inFlight.delete(handle));
      // The whole exchange is bounded, not only the connect: a link that hangs (no RST) ends too.
      const timer = setTimeout(() => req.destroy(new Error(`no answer within ${options.timeoutMs} ms`)), options.timeoutMs);
      req.on('close', () => clearTimeout(timer));
      req.on('timeout', () => req.destroy(new Error(`idle for ${options.timeoutMs} ms`)));
      req.on('error', reject);
      req.end(options.body);
    });
  }

  return {
    /**
     * Asks the centrals in turn, starting with the one that answered last; a 5xx answer counts
     * as no answer. Throws CentralUnreachableError when none answered.
     */
    async request(path: string, options: { method?: string; headers?: Record<string, string>; body?: unknown; timeoutMs: number }): Promise<SiteResponse> {
      const reasons: string[] = [];
      const body = options.body === undefined ? undefined : Buffer.from(JSON.stringify(options.body));
      for (let i = 0; i < deps.urls.length; i++) {
        const index = (current + i) % deps.urls.length;
        const base = deps.urls[index]!;
        try {
          const res = await once(base, path, { method: options.method ?? 'GET', headers: options.headers ?? {}, ...(body ? { body } : {}), timeoutMs: options.timeoutMs });
          if (res.status >= 500) {
            reasons.push(`${base}: ${res.status}`);
            continue;
          }
          current = index;
          return res;
        } catch (err) {
          reasons.push(`${base}: ${(err as Error).message}`);
        }
      }
      throw new CentralUnreachableError(`no central answered (${reasons.join('; ')})`);
    },
    /** The central after the one that answered last (it is behind the edge). */
    skip(): void {
      current = (current + 1) % deps.urls.length;
    },
    /** Ends the requests in flight (a long poll at stop). */
    abortAll(): void {
      for (const r of [...inFlight]) r.destroy();
    },
  };
}
export type SiteClient = ReturnType<typeof createSiteClient>;

// fetch() that trusts one CA (the gateway's) for https: URLs and nothing else: Node's own fetch
// takes no `ca`, and NODE_EXTRA_CA_CERTS is read only at process start. Answers a real Response,
// never follows redirects (as fetch's redirect: 'manual'); http: URLs go to the global fetch.
import { readFileSync } from 'node:fs';
import { request } from 'node:https';

export interface SimpleRequestInit {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

export type FetchLike = (url: string | URL, init?: SimpleRequestInit) => Promise<Response>;

/** A fetch for which only the certificate in `caFile` vouches for https servers. */
export function fetchTrusting(caFile: string): FetchLike {
  const ca = readFileSync(caFile);
  return async (input, init = {}) => {
    const url = new URL(input);
    if (url.protocol !== 'https:') return fetch(url, { ...init, redirect: 'manual' } as RequestInit);
    return new Promise<Response>((resolve, reject) => {
      const req = request(url, { method: init.method ?? 'GET', headers: init.headers, ca, agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const headers = new Headers();
          for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) headers.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
          const status = res.statusCode ?? 0;
          const body = status === 204 || status === 304 ? null : Buffer.concat(chunks);
          resolve(new Response(body, { status, statusText: res.statusMessage ?? '', headers }));
        });
      });
      req.on('error', reject);
      req.end(init.body);
    });
  };
}

// The one way the UI talks to gatewayd: the public REST API, with the session token as a
// Bearer credential. Every failure becomes an ApiError carrying the API's own `message`.

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly errors?: { path: string; message: string }[],
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export type Query = Record<string, string | number | boolean | (string | number)[] | undefined>;

export interface RequestOptions {
  body?: unknown;
  query?: Query;
  /** Sent as is (multipart uploads). */
  form?: FormData;
  /** A text body of another media type (a service file as YAML). */
  text?: { body: string; type: string };
  /** Extra request headers (Accept of a YAML answer). */
  headers?: Record<string, string>;
  /** How to read a 2xx body (default: JSON when the server says so, else nothing). */
  as?: 'json' | 'blob';
  /** false for the calls that need no credential (login, mfa/login, auth/idp). */
  auth?: boolean;
  /** Overrides the session token (the limited token of an MFA enrollment). */
  token?: string;
  signal?: AbortSignal;
}

interface ApiHooks {
  token: () => string | undefined;
  /** A call made with the session's token answered 401: the session is over. */
  unauthorized: () => void;
}

let hooks: ApiHooks = { token: () => undefined, unauthorized: () => {} };

export function setApiHooks(next: ApiHooks): void {
  hooks = next;
}

export function queryString(query: Query | undefined): string {
  if (!query) return '';
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) params.append(key, String(v));
    else params.append(key, String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : '';
}

/** The API's error body, or a sentence for what is not one (a proxy's page, an empty answer). */
function errorFromBody(status: number, statusText: string, text: string): ApiError {
  try {
    const body = JSON.parse(text) as { message?: unknown; errors?: { path: string; message: string }[] };
    if (typeof body.message === 'string' && body.message) return new ApiError(status, body.message, body.errors);
  } catch {
    // not JSON: fall through
  }
  return new ApiError(status, `the gateway answered ${status} ${statusText}`.trim());
}

async function errorOf(res: Response): Promise<ApiError> {
  return errorFromBody(res.status, res.statusText, await res.text().catch(() => ''));
}

const networkError = () => new ApiError(0, 'the gateway cannot be reached (network error); check the connection and try again');

export async function api<T = unknown>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json', ...(options.headers ?? {}) };
  const usesSession = options.auth !== false && options.token === undefined;
  const token = options.auth === false ? undefined : (options.token ?? hooks.token());
  if (token) headers.authorization = `Bearer ${token}`;
  let body: BodyInit | undefined;
  if (options.form) body = options.form;
  else if (options.text) {
    body = options.text.body;
    headers['content-type'] = options.text.type;
  } else if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] = 'application/json';
  }
  let res: Response;
  try {
    res = await fetch(path + queryString(options.query), { method, headers, body, signal: options.signal, cache: 'no-store' });
  } catch (err) {
    if ((err as Error).name === 'AbortError') throw err;
    throw networkError();
  }
  if (!res.ok) {
    const error = await errorOf(res);
    if (res.status === 401 && usesSession && token) hooks.unauthorized();
    throw error;
  }
  if (options.as === 'blob') return (await res.blob()) as T;
  const text = await res.text();
  if (!text) return undefined as T;
  if ((res.headers.get('content-type') ?? '').includes('json') || options.as === 'json') return JSON.parse(text) as T;
  return text as T;
}

/** The message to show for anything thrown. */
export function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}

/** A file download of a body the API answers (it needs the Bearer header, so no plain link). */
export async function download(path: string, fallbackName: string): Promise<string> {
  const token = hooks.token();
  let res: Response;
  try {
    res = await fetch(path, { headers: token ? { authorization: `Bearer ${token}` } : {}, cache: 'no-store' });
  } catch {
    throw networkError();
  }
  if (!res.ok) {
    const error = await errorOf(res);
    if (res.status === 401 && token) hooks.unauthorized();
    throw error;
  }
  const disposition = res.headers.get('content-disposition') ?? '';
  const name = /filename="([^"]+)"/.exec(disposition)?.[1] ?? fallbackName;
  saveBlob(await res.blob(), name);
  return name;
}

export function saveBlob(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 30_000);
}

/** A multipart upload with progress (fetch reports none): XMLHttpRequest, same credential and errors. */
export function upload(path: string, form: FormData, onProgress: (fraction: number) => void): Promise<void> {
  const token = hooks.token();
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', path);
    if (token) xhr.setRequestHeader('authorization', `Bearer ${token}`);
    xhr.setRequestHeader('accept', 'application/json');
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable) onProgress(e.loaded / e.total);
    };
    xhr.onerror = () => reject(networkError());
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) return resolve();
      if (xhr.status === 401 && token) hooks.unauthorized();
      reject(errorFromBody(xhr.status, xhr.statusText, xhr.responseText));
    };
    xhr.send(form);
  });
}

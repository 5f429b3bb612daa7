// Pages of an API that answers {items, nextCursor}: the cursors of the pages before the current
// one are kept, so "previous" goes back without the API having to page backwards.
import { useState } from 'preact/hooks';
import { useAsync, type Async } from '../hooks.js';
import { Button } from './forms.js';

export interface CursorPage<T> {
  items: T[];
  nextCursor?: string;
}

export interface CursorPages<T> {
  page: Async<CursorPage<T>>;
  /** 1 for the first page. */
  number: number;
  back(): void;
  forward(): void;
  /** Back to the first page (new filters). */
  reset(): void;
}

export function useCursorPages<T>(load: (cursor: string | undefined) => Promise<CursorPage<T>>, deps: unknown[]): CursorPages<T> {
  const [cursors, setCursors] = useState<(string | undefined)[]>([undefined]);
  const cursor = cursors[cursors.length - 1];
  const page = useAsync(() => load(cursor), [...deps, cursor]);
  return {
    page,
    number: cursors.length,
    back: () => setCursors((c) => (c.length > 1 ? c.slice(0, -1) : c)),
    forward: () => {
      const next = page.data?.nextCursor;
      if (next) setCursors((c) => [...c, next]);
    },
    reset: () => setCursors([undefined]),
  };
}

export function CursorPager<T>(props: { pages: CursorPages<T>; what: string; back?: string; forward?: string }) {
  const { pages } = props;
  return (
    <nav class="pager" aria-label={`Pages of ${props.what}`}>
      <Button disabled={pages.number <= 1} onClick={pages.back}>
        {props.back ?? 'Previous page'}
      </Button>
      <span aria-live="polite">Page {pages.number}</span>
      <Button disabled={!pages.page.data?.nextCursor} onClick={pages.forward}>
        {props.forward ?? 'Next page'}
      </Button>
    </nav>
  );
}

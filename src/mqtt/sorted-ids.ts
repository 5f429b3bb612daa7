// Client ids in code-unit order, for paging live clients by id without sorting them per request:
// a binary search finds a page's start, an insert or removal moves the tail of one array (a
// memmove; microseconds for thousands of clients).

export class SortedIds {
  private readonly ids: string[] = [];

  get size(): number {
    return this.ids.length;
  }

  /** The index of the first id not below `id`. */
  private lowerBound(id: string): number {
    let lo = 0;
    let hi = this.ids.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.ids[mid]! < id) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  add(id: string): void {
    const i = this.lowerBound(id);
    if (this.ids[i] !== id) this.ids.splice(i, 0, id);
  }

  delete(id: string): void {
    const i = this.lowerBound(id);
    if (this.ids[i] === id) this.ids.splice(i, 1);
  }

  /** Up to `limit` ids above `after` that start with `prefix`, in order. */
  page(after: string | undefined, prefix: string, limit: number): string[] {
    const start = after !== undefined && after >= prefix ? this.lowerBound(after) + (this.ids[this.lowerBound(after)] === after ? 1 : 0) : this.lowerBound(prefix);
    const out: string[] = [];
    for (let i = start; i < this.ids.length && out.length < limit; i++) {
      const id = this.ids[i]!;
      if (!id.startsWith(prefix)) break;
      out.push(id);
    }
    return out;
  }
}

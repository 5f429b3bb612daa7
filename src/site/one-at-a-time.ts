/**
 * Runs async steps one after another in the order they were asked for (a failed step does not
 * stop the next): a replica's applies, a central's catch-ups and writes, its PostgreSQL writes.
 */
export function oneAtATime() {
  let queue: Promise<unknown> = Promise.resolve();
  return <T>(fn: () => Promise<T>): Promise<T> => {
    const run = queue.then(fn, fn);
    queue = run.catch(() => undefined);
    return run;
  };
}

// What a daemon process started with --inspect=127.0.0.1:<port> really holds, asked through its
// inspector (the DevTools protocol over Node's own WebSocket client): a full GC first, then the
// heap in use, the external memory (Buffers, ArrayBuffers) and the active handles and requests
// by kind (sockets, timers, ...). RSS alone cannot tell a leak from memory V8 and the C allocator
// keep after a burst (freed, but not given back to the system): what is held after a GC can.
export interface HeldMemory {
  heapUsedMiB: number;
  externalMiB: number;
  /** heapUsed + external after the GC: what the process keeps alive. */
  heldMiB: number;
  /** Heap V8 has reserved for its spaces after the GC (committed, not all in use). */
  heapTotalMiB: number;
  rssMiB: number;
  /** process.getActiveResourcesInfo(), counted by kind (TCPSocketWrap, Timeout, ...). */
  resources: Record<string, number>;
}

/** process.memoryUsage() as it is, no GC first: what a burst has allocated and not yet collected. */
export interface MemoryUsageSample {
  heapTotalMiB: number;
  heapUsedMiB: number;
  externalMiB: number;
  arrayBuffersMiB: number;
  rssMiB: number;
  /** Committed size of V8's young generation (new_space) and of its old generation (old_space). */
  newSpaceMiB: number;
  oldSpaceMiB: number;
}

export interface DaemonInspector {
  held(): Promise<HeldMemory>;
  usage(): Promise<MemoryUsageSample>;
  /** V8's sampling heap profiler: start, then the profile of what is still on the heap (collected or not yet), for a diagnosis. */
  startSampling(intervalBytes?: number): Promise<void>;
  samplingProfile(): Promise<unknown>;
  close(): void;
}

const MIB = 2 ** 20;

export async function openDaemonInspector(port: number): Promise<DaemonInspector> {
  const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as Array<{ webSocketDebuggerUrl: string }>;
  const url = targets[0]?.webSocketDebuggerUrl;
  if (!url) throw new Error(`no inspector target on port ${port}`);
  const socket = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    socket.addEventListener('open', () => resolve(), { once: true });
    socket.addEventListener('error', () => reject(new Error(`inspector ${url}: could not connect`)), { once: true });
  });
  let nextId = 1;
  const pending = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();
  socket.addEventListener('message', (event) => {
    const message = JSON.parse(String(event.data)) as { id?: number; result?: unknown; error?: { message: string } };
    const waiting = message.id === undefined ? undefined : pending.get(message.id);
    if (!waiting) return;
    pending.delete(message.id!);
    if (message.error) waiting.reject(new Error(message.error.message));
    else waiting.resolve(message.result);
  });
  const call = (method: string, params: Record<string, unknown> = {}): Promise<any> =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve, reject });
      socket.send(JSON.stringify({ id, method, params }));
    });
  return {
    async held() {
      // Twice: what the first collection's finalizers release goes in the second.
      await call('HeapProfiler.collectGarbage');
      await call('HeapProfiler.collectGarbage');
      const result = await call('Runtime.evaluate', {
        expression: 'JSON.stringify({ m: process.memoryUsage(), r: process.getActiveResourcesInfo() })',
        returnByValue: true,
      });
      const { m, r } = JSON.parse(result.result.value as string) as { m: NodeJS.MemoryUsage; r: string[] };
      const resources: Record<string, number> = {};
      for (const kind of r) resources[kind] = (resources[kind] ?? 0) + 1;
      return { heapUsedMiB: m.heapUsed / MIB, externalMiB: m.external / MIB, heldMiB: (m.heapUsed + m.external) / MIB, heapTotalMiB: m.heapTotal / MIB, rssMiB: m.rss / MIB, resources };
    },
    async usage() {
      const expression = "JSON.stringify({ m: process.memoryUsage(), s: process.getBuiltinModule('node:v8').getHeapSpaceStatistics() })";
      const result = await call('Runtime.evaluate', { expression, returnByValue: true });
      const { m, s } = JSON.parse(result.result.value as string) as { m: NodeJS.MemoryUsage; s: Array<{ space_name: string; space_size: number }> };
      const space = (name: string) => (s.find((x) => x.space_name === name)?.space_size ?? 0) / MIB;
      return {
        heapTotalMiB: m.heapTotal / MIB,
        heapUsedMiB: m.heapUsed / MIB,
        externalMiB: m.external / MIB,
        arrayBuffersMiB: m.arrayBuffers / MIB,
        rssMiB: m.rss / MIB,
        newSpaceMiB: space('new_space'),
        oldSpaceMiB: space('old_space'),
      };
    },
    async startSampling(intervalBytes = 16_384) {
      await call('HeapProfiler.enable');
      await call('HeapProfiler.startSampling', { samplingInterval: intervalBytes, includeObjectsCollectedByMajorGC: false, includeObjectsCollectedByMinorGC: false });
    },
    async samplingProfile() {
      return (await call('HeapProfiler.getSamplingProfile')).profile;
    },
    close() {
      socket.close();
    },
  };
}

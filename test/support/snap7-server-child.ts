// The child process that runs snap7's S7 server (snap7-server.ts starts it): the native addon
// stays out of the test process. argv[2] is the addon's path. Requests come over the IPC channel
// as {id, cmd, ...} and are answered {id, ok, result?, error?}; writes of clients to the server's
// memory are told as {event: 'write', area, db, start, size}.
//   start {port, dbs: {number: bytes}, I, Q, M, pduLength?}   registers the areas, listens on 127.0.0.1:port
//   set {area, db, offset, hex}                    changes the memory
//   get {area, db, offset, length}                 reads it (result: hex)
//   stop                                           stops the server and exits
import { EventEmitter } from 'node:events';
import { createRequire } from 'node:module';

interface Snap7ServerApi extends EventEmitter {
  SetParam(param: number, value: number): boolean;
  SetEventMask(mask: number): void;
  RegisterArea(area: number, index: number, buffer: Buffer): boolean;
  RegisterArea(area: number, buffer: Buffer): boolean;
  GetArea(area: number, index?: number): Buffer;
  SetArea(area: number, index: number, buffer: Buffer): void;
  SetArea(area: number, buffer: Buffer): void;
  StartTo(ip: string): boolean;
  Stop(): boolean;
  LastError(): number;
  ErrorText(code: number): string;
  LocalPort: number;
  /** The PDU length the server imposes (0: it takes the client's proposal). */
  PDURequest: number;
  srvAreaPE: number;
  srvAreaPA: number;
  srvAreaMK: number;
  srvAreaDB: number;
}

const addon = createRequire(import.meta.url)(process.argv[2]!) as { S7Server: new () => Snap7ServerApi };
// What node-snap7's own wrapper does: the server emits its events through EventEmitter.
Object.setPrototypeOf(addon.S7Server.prototype, EventEmitter.prototype);
const server = new addon.S7Server();

const EVC_DATA_WRITE = 0x00040000;
const S7_AREA_CODES: Record<number, string> = { 0x81: 'I', 0x82: 'Q', 0x83: 'M', 0x84: 'DB' };
const send = (message: unknown) => process.send?.(message);

function areaCode(area: string): number {
  return { I: server.srvAreaPE, Q: server.srvAreaPA, M: server.srvAreaMK, DB: server.srvAreaDB }[area] ?? -1;
}
function memory(area: string, db: number): Buffer {
  return area === 'DB' ? server.GetArea(server.srvAreaDB, db) : server.GetArea(areaCode(area));
}

type Request = { id: number; cmd: string; [key: string]: any };

function handle(m: Request): unknown {
  switch (m.cmd) {
    case 'start': {
      for (const [db, size] of Object.entries(m.dbs as Record<string, number>)) server.RegisterArea(server.srvAreaDB, Number(db), Buffer.alloc(size));
      for (const area of ['I', 'Q', 'M']) if (m[area]) server.RegisterArea(areaCode(area), Buffer.alloc(m[area] as number));
      // Only writes are told to the test: read events would flood a polled server.
      server.SetEventMask(EVC_DATA_WRITE);
      server.on('event', (e: { EvtCode: number; EvtRetCode: number; EvtParam1: number; EvtParam2: number; EvtParam3: number; EvtParam4: number }) => {
        if (e.EvtCode === EVC_DATA_WRITE && e.EvtRetCode === 0) send({ event: 'write', area: S7_AREA_CODES[e.EvtParam1] ?? String(e.EvtParam1), db: e.EvtParam2, start: e.EvtParam3, size: e.EvtParam4 });
      });
      server.SetParam(server.LocalPort, m.port as number);
      if (m.pduLength) server.SetParam(server.PDURequest, m.pduLength as number);
      if (!server.StartTo('127.0.0.1')) throw new Error(`snap7 server did not start on port ${m.port}: ${server.ErrorText(server.LastError())}`);
      return undefined;
    }
    case 'set': {
      const area = m.area as string;
      const db = m.db as number;
      const mem = memory(area, db);
      Buffer.from(m.hex as string, 'hex').copy(mem, m.offset as number);
      if (area === 'DB') server.SetArea(server.srvAreaDB, db, mem);
      else server.SetArea(areaCode(area), mem);
      return undefined;
    }
    case 'get':
      return memory(m.area as string, m.db as number)
        .subarray(m.offset as number, (m.offset as number) + (m.length as number))
        .toString('hex');
    case 'stop':
      server.Stop();
      setImmediate(() => process.exit(0));
      return undefined;
    default:
      throw new Error(`unknown command ${m.cmd}`);
  }
}

process.on('message', (m: Request) => {
  try {
    send({ id: m.id, ok: true, result: handle(m) });
  } catch (err) {
    send({ id: m.id, ok: false, error: (err as Error).message });
  }
});
// The test process went away: so does the server.
process.on('disconnect', () => process.exit(0));

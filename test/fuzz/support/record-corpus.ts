// npm run fuzz -- --record: seed cases from our own integration traffic. Our drivers talk to the
// test kit's devices (snap7's S7 server, the CIP server, the Modbus server) through a proxy that
// passes everything and hands each answer over; each target turns an answer into one of its
// cases (caseFromRecording) and it is kept under test/fuzz/corpus/<target>/ by its hash. What
// is recorded is ours (our requests, the kit's answers); nothing fetched from elsewhere.
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createEtherNetIpDriver } from '../../../src/mapping/drivers/ethernet-ip.js';
import { createModbusDriver } from '../../../src/mapping/drivers/modbus.js';
import { createS7Driver } from '../../../src/mapping/drivers/s7.js';
import { createSerialLines } from '../../../src/mapping/drivers/serial-lines.js';
import type { ConnectionDriver } from '../../../src/mapping/drivers/types.js';
import type { EndpointDef } from '../../../src/mapping/service-files.js';
import { startModbusServer } from '../../mapping-support.js';
import { startCipServer } from '../../support/cip-server.js';
import { startMutatingProxy, type Framing } from '../../support/mutating-proxy.js';
import { startSnap7Server } from '../../support/snap7-server.js';
import { caseFromRecording as cipCase } from '../targets/cip-replies.js';
import { caseFromRecording as modbusCase } from '../targets/modbus-answers.js';
import { caseFromRecording as s7Case } from '../targets/s7-answers.js';
import { cipFields, encapFraming } from '../wire/cip-wire.js';
import { mbapFraming, modbusFields } from '../wire/modbus-wire.js';
import { s7Fields, tpktFraming } from '../wire/s7-wire.js';
import { corpusDir } from './corpus.js';
import type { WireField } from './mutators.js';

const ep = (address: Record<string, unknown>, operation: 'read' | 'write' = 'read') => ({ address, operation }) as unknown as EndpointDef;

/** Runs `work` with a driver connected through a recording proxy; returns the cases made of the answers. */
async function record(port: number, framing: Framing, fields: (f: Buffer) => WireField[], toCase: (f: Buffer) => Uint8Array | undefined, driverFor: (port: number) => ConnectionDriver, work: (d: ConnectionDriver) => Promise<unknown>): Promise<Uint8Array[]> {
  const frames: Buffer[] = [];
  const proxy = await startMutatingProxy({ target: { port }, framing, fields, seed: 1, onAnswer: (f) => frames.push(f) });
  const driver = driverFor(proxy.port);
  try {
    await driver.connect();
    await work(driver);
  } finally {
    await driver.disconnect();
    await proxy.close();
  }
  return frames.map(toCase).filter((c): c is Uint8Array => c !== undefined);
}

function keep(target: string, cases: Uint8Array[]): number {
  const dir = corpusDir(target);
  mkdirSync(dir, { recursive: true });
  const names = new Set(cases.map((c) => {
    const name = createHash('sha256').update(c).digest('hex').slice(0, 16);
    writeFileSync(join(dir, `${name}.bin`), c);
    return name;
  }));
  console.log(`${target}: ${names.size} cases in ${dir}`);
  return names.size;
}

const settle = (p: Promise<unknown>) => p.catch(() => undefined);

export async function recordCorpus(): Promise<void> {
  // S7: snap7 with one value of each type, refusals, a write.
  const plc = await startSnap7Server({ dbs: { 1: 256 } });
  try {
    const db = Buffer.alloc(256);
    db.writeInt16BE(-215, 8);
    db.writeFloatBE(3.3, 14);
    db[18] = 16;
    db[19] = 5;
    db.write('Bread', 20, 'latin1');
    await plc.set('DB', 1, 0, db);
    const cases = await record(plc.port, tpktFraming, s7Fields, s7Case, (port) => createS7Driver({ host: '127.0.0.1', port, rack: 0, slot: 1, timeoutMs: 2000 }), async (d) => {
      await Promise.all([
        settle(d.read(ep({ area: 'DB', dbNumber: 1, offset: 8, type: 'INT' }))),
        settle(d.read(ep({ area: 'DB', dbNumber: 1, offset: 14, type: 'REAL' }))),
        settle(d.read(ep({ area: 'DB', dbNumber: 1, offset: 18, type: 'STRING', length: 16 }))),
        settle(d.read(ep({ area: 'DB', dbNumber: 1, offset: 0, bit: 3, type: 'BOOL' }))),
        settle(d.read(ep({ area: 'M', offset: 1, type: 'BYTE' }))),
      ]);
      await Promise.all([settle(d.read(ep({ area: 'DB', dbNumber: 1, offset: 254, type: 'DINT' }))), settle(d.read(ep({ area: 'DB', dbNumber: 9, offset: 0, type: 'INT' })))]);
      await settle(d.read(ep({ area: 'DB', dbNumber: 1, offset: 0, type: 'STRING', length: 254 })));
      await settle(d.write(ep({ area: 'DB', dbNumber: 1, offset: 40, type: 'INT' }, 'write'), 7));
      await settle(d.write(ep({ area: 'Q', offset: 0, bit: 1, type: 'BOOL' }, 'write'), true));
      await settle(d.write(ep({ area: 'DB', dbNumber: 9, offset: 0, type: 'INT' }, 'write'), 7));
    });
    keep('s7-answers', cases);
  } finally {
    await plc.stop();
  }

  // EtherNet/IP: tags of every type, an array read in fragments, a batch (Multiple Service Packet), refusals, writes.
  const cip = await startCipServer({
    tags: {
      Speed: { type: 'DINT', value: 1500 },
      Level: { type: 'INT', value: -12 },
      Ratio: { type: 'LREAL', value: Math.PI },
      Running: { type: 'BOOL', value: true },
      Counter: { type: 'LINT', value: 2n ** 60n + 1n },
      Temps: { type: 'REAL', length: 10, value: [1.5, 2.5, 3.5] },
      Trend: { type: 'LREAL', length: 200, value: Array.from({ length: 200 }, (_, i) => i / 4) },
      Flags: { type: 'BOOL', length: 64, value: [true, false, true] },
    },
  });
  try {
    const cases = await record(cip.port, encapFraming, cipFields, cipCase, (port) => createEtherNetIpDriver({ host: '127.0.0.1', port, slot: 0, timeoutMs: 2000 }), async (d) => {
      await Promise.all(['Speed', 'Level', 'Ratio', 'Running', 'Counter'].map((tag) => settle(d.read(ep({ tag })))));
      await settle(d.read(ep({ tag: 'Temps[2]', type: 'REAL', elements: 5 })));
      await settle(d.read(ep({ tag: 'Trend', type: 'LREAL', elements: 200 })));
      await settle(d.read(ep({ tag: 'Flags[1]', type: 'BOOL', elements: 3 })));
      await Promise.all([settle(d.read(ep({ tag: 'Ghost', type: 'DINT' }))), settle(d.read(ep({ tag: 'Speed', type: 'REAL' })))]);
      await settle(d.write(ep({ tag: 'Speed', type: 'DINT' }, 'write'), 1));
      await settle(d.write(ep({ tag: 'Flags[2]', type: 'BOOL' }, 'write'), false));
    });
    keep('cip-replies', cases);
  } finally {
    await cip.stop();
  }

  // Modbus: each table, writes, an exception response.
  const device = await startModbusServer();
  try {
    for (let i = 0; i < 20; i++) device.holding[i] = i * 1000;
    device.coils[3] = true;
    const lines = createSerialLines();
    const cases = await record(device.port, mbapFraming, modbusFields, modbusCase, (port) => createModbusDriver({ host: '127.0.0.1', port, unitId: 1, timeoutMs: 2000 }, { lines }), async (d) => {
      for (const table of ['holding', 'input', 'coil', 'discrete']) for (const quantity of [1, 3, 17]) await settle(d.read(ep({ table, address: 0, quantity })));
      await settle(d.write(ep({ table: 'holding', address: 5 }, 'write'), [1, 2, 3]));
      await settle(d.write(ep({ table: 'coil', address: 2 }, 'write'), [true, false]));
      await settle(d.read(ep({ table: 'holding', address: 990, quantity: 20 })));
    });
    keep('modbus-answers', cases);
  } finally {
    await device.stop();
  }
}

// Fuzz target: what a Modbus TCP device answers, through our driver as the gateway runs it
// (modbus.ts createTcpDriver: our MBAP port, modbus-serial's PDU parsers, our checks of what
// was asked) on a socket of the test's: the driver connects, reads registers or bits or writes,
// the case's bytes arrive cut at random points, and when they do not settle the request the
// device closes the connection. Cases: a valid answer from our encoders (test/fuzz/wire/
// modbus-wire.ts: read answers, write echoes, exception responses) with 0-3 mutations, and raw
// bytes. Oracles: the request settles (at the latest when the connection closes); only
// ProtocolError, DeviceError (an exception response) and ModbusLinkError (the connection)
// escape; a valid answer gives exactly its values; any answer taken gives exactly the number
// of values asked, each of its kind.
import { EventEmitter } from 'node:events';
import fc from 'fast-check';
import { ProtocolError } from '../../../src/errors/errors.js';
import { createTcpDriver } from '../../../src/mapping/drivers/modbus.js';
import { ModbusLinkError, type ModbusSocket } from '../../../src/mapping/drivers/modbus-tcp-port.js';
import { DeviceError } from '../../../src/mapping/drivers/types.js';
import type { EndpointDef } from '../../../src/mapping/service-files.js';
import { CaseReader, CaseWriter } from '../support/fuzz-case.js';
import { OracleError, onlyTypedAsync, type FuzzTarget } from '../support/fuzz-target.js';
import { allocatedNow } from '../support/oracles.js';
import { withCorpus } from '../support/corpus.js';
import { applyMutations, chunksAt, mutationsArbitrary, splitPointsArbitrary, type Mutation } from '../support/mutators.js';
import { exceptionPdu, mbap, modbusFields, readPdu, writeEcho } from '../wire/modbus-wire.js';

const OPS = [
  { table: 'holding', fc: 3, write: false, bits: false },
  { table: 'input', fc: 4, write: false, bits: false },
  { table: 'coil', fc: 1, write: false, bits: true },
  { table: 'discrete', fc: 2, write: false, bits: true },
  { table: 'holding', fc: 16, write: true, bits: false },
  { table: 'coil', fc: 15, write: true, bits: true },
] as const;

interface ModbusCase {
  op: number;
  address: number;
  quantity: number;
  /** Register values, or bits (one byte each, 0/1). */
  values: number[];
  /** 0: a normal answer; else this exception code. */
  exception: number;
  splits: number[];
  stream: Uint8Array;
}

const bitBytes = (bits: number[]) => {
  const b = Buffer.alloc(Math.ceil(bits.length / 8));
  bits.forEach((v, i) => (b[i >> 3]! |= (v & 1) << (i & 7)));
  return b;
};

/** The device's valid answer to the case's request (the driver's first transaction: id 1, unit 1). */
function validAnswer(c: Omit<ModbusCase, 'splits' | 'stream'>): Buffer {
  const op = OPS[c.op]!;
  if (c.exception) return mbap(1, 1, exceptionPdu(op.fc, c.exception));
  if (op.write) return mbap(1, 1, writeEcho(op.fc, c.address, c.quantity));
  if (op.bits) return mbap(1, 1, readPdu(op.fc, bitBytes(c.values)));
  const data = Buffer.alloc(2 * c.values.length);
  c.values.forEach((v, i) => data.writeUInt16BE(v, 2 * i));
  return mbap(1, 1, readPdu(op.fc, data));
}

function toCase(c: ModbusCase): Uint8Array {
  const w = new CaseWriter().u8(c.op).u16(c.address).u8(c.quantity - 1).u8(c.exception);
  for (const v of c.values) w.u16(v);
  w.u8(c.splits.length);
  for (const s of c.splits) w.u16(s);
  return w.rest(c.stream);
}

function fromCase(bytes: Uint8Array): ModbusCase {
  const r = new CaseReader(bytes);
  const op = r.u8() % OPS.length;
  const address = r.u16();
  const quantity = 1 + (r.u8() % (OPS[op]!.bits ? 200 : 120));
  const exception = r.u8() % 12;
  const values = Array.from({ length: quantity }, () => (OPS[op]!.bits ? r.u16() & 1 : r.u16()));
  const splits = Array.from({ length: r.u8() % 9 }, () => r.u16());
  return { op, address, quantity, exception, values, splits, stream: r.rest() };
}

/** A socket of the test's: what the driver writes is kept, the device's bytes are emitted by the case. */
class CaseSocket extends EventEmitter {
  readonly written: Buffer[] = [];
  destroyed = false;
  write(b: Buffer): boolean {
    this.written.push(b);
    return true;
  }
  destroy(): this {
    if (this.destroyed) return this;
    this.destroyed = true;
    queueMicrotask(() => this.emit('close'));
    return this;
  }
  setNoDelay(): this {
    return this;
  }
}

/** Lets pending promise chains run (modbus-serial writes after a few of them). */
async function settle(rounds = 16): Promise<void> {
  for (let i = 0; i < rounds; i++) await Promise.resolve();
}

async function runCase(c: ModbusCase): Promise<void> {
  const op = OPS[c.op]!;
  const valid = Buffer.from(c.stream).equals(validAnswer(c));
  const socket = new CaseSocket();
  const driver = createTcpDriver({ host: 'fuzz', port: 502, unitId: 1, timeoutMs: 60_000 }, () => {
    queueMicrotask(() => socket.emit('connect'));
    return socket as unknown as ModbusSocket;
  });
  await driver.connect();
  const ep = { address: { table: op.table, address: c.address, quantity: c.quantity }, operation: op.write ? 'write' : 'read' } as unknown as EndpointDef;
  const values = op.bits ? c.values.map((v) => v === 1) : c.values;
  let settled = false;
  const request = onlyTypedAsync([ProtocolError, DeviceError, ModbusLinkError], () => (op.write ? driver.write(ep, values) : driver.read(ep))).finally(() => (settled = true));
  await settle();
  if (!socket.written.length) {
    // Refused before anything was sent (a write of more values than a request carries).
    const refused = settled ? await request : undefined;
    if (refused && 'refused' in refused && refused.refused instanceof DeviceError) return driver.disconnect();
    throw new OracleError('wrong', 'the driver sent no request');
  }
  // The answer's phase alone is held to the allocation bound: the driver's connect around it is a fixed cost.
  const before = allocatedNow();
  for (const chunk of chunksAt(Buffer.from(c.stream), c.splits)) {
    if (socket.destroyed) break;
    socket.emit('data', chunk);
    await settle(4);
  }
  await settle();
  const allocatedByAnswer = allocatedNow() - before;
  const allowance = 16 * c.stream.length + 64 * 1024;
  if (allocatedByAnswer > allowance) throw new OracleError('memory', `an answer of ${c.stream.length} bytes allocated ${allocatedByAnswer} bytes (at most ${allowance})`);
  const closedByDevice = !settled;
  if (closedByDevice) socket.destroy();
  await settle();
  if (!settled) throw new OracleError('unsafe', 'the request was still pending after its connection closed');
  const outcome = await request;
  await driver.disconnect();
  if (!valid) {
    // Modbus TCP has no checksum: a changed value byte is a value. What must hold is the shape:
    // exactly the values asked, each of its kind (an extra register read from a CRC, no).
    if ('value' in outcome && !op.write) {
      const got = outcome.value as unknown[];
      const fits = Array.isArray(got) && got.length === c.quantity && got.every((v) => (op.bits ? typeof v === 'boolean' : Number.isInteger(v) && (v as number) >= 0 && (v as number) <= 0xffff));
      if (!fits) throw new OracleError('wrong', `an answer gave ${JSON.stringify(got)?.slice(0, 80)} for ${c.quantity} ${op.bits ? 'bits' : 'registers'}`);
    }
    return;
  }
  if (c.exception) {
    if (!('refused' in outcome) || !(outcome.refused instanceof DeviceError)) throw new OracleError('wrong', 'a valid exception response was not a DeviceError');
    return;
  }
  if ('refused' in outcome) throw new OracleError('wrong', `a valid answer was refused: ${outcome.refused.message}`);
  if (!op.write && JSON.stringify(outcome.value) !== JSON.stringify(values)) throw new OracleError('wrong', `a valid answer gave ${JSON.stringify(outcome.value).slice(0, 80)}`);
}

const shape = fc
  .record({ op: fc.integer({ min: 0, max: OPS.length - 1 }), address: fc.nat({ max: 0xffff }), quantity: fc.integer({ min: 1, max: 40 }), exception: fc.oneof({ weight: 5, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 11 }) }) })
  .chain((s) => fc.array(OPS[s.op]!.bits ? fc.integer({ min: 0, max: 1 }) : fc.nat({ max: 0xffff }), { minLength: s.quantity, maxLength: s.quantity }).map((values) => ({ ...s, values })));
const anyAnswer = shape.map((c) => validAnswer(c) as Uint8Array);
const structured = fc
  .record({ shape, mutations: fc.oneof({ weight: 1, arbitrary: fc.constant([] as Mutation[]) }, { weight: 6, arbitrary: mutationsArbitrary(anyAnswer) }), splits: splitPointsArbitrary })
  .map(({ shape: c, mutations, splits }) => {
    const valid = validAnswer(c);
    return toCase({ ...c, splits, stream: applyMutations(valid, modbusFields(valid), mutations) });
  });

/** A recorded answer (an MBAP frame from the test kit's Modbus server) as a case, its request read back from it. */
export function caseFromRecording(frame: Buffer): Uint8Array | undefined {
  if (frame.length < 9) return undefined;
  const fc = frame[7]!;
  const op = OPS.findIndex((o) => o.fc === (fc & 0x7f));
  if (op < 0) return undefined;
  const stream = Buffer.from(frame);
  stream.writeUInt16BE(1, 0); // the driver's first transaction
  if (fc & 0x80) return toCase({ op, address: 0, quantity: 1, values: [0], exception: frame[8]!, splits: [], stream });
  if (OPS[op]!.write) return toCase({ op, address: frame.readUInt16BE(8), quantity: frame.readUInt16BE(10), values: Array.from({ length: frame.readUInt16BE(10) }, () => 0), exception: 0, splits: [], stream });
  const data = frame.subarray(9, 9 + frame[8]!);
  const values = OPS[op]!.bits ? Array.from({ length: data.length * 8 }, (_v, i) => (data[i >> 3]! >> (i & 7)) & 1) : Array.from({ length: data.length / 2 }, (_v, i) => data.readUInt16BE(2 * i));
  if (!values.length || values.length > (OPS[op]!.bits ? 200 : 120)) return undefined;
  return toCase({ op, address: 0, quantity: values.length, values, exception: 0, splits: [], stream });
}

export const target: FuzzTarget = {
  name: 'modbus-answers',
  description: 'Modbus TCP answers through our driver (MBAP port, modbus-serial PDU parsers, our checks): reads of registers and bits, writes, exceptions; valid answers from our encoders with 0-3 mutations at random split points, and raw bytes',
  async: true,
  // The whole case also connects and disconnects a driver (a fixed cost, measured about 100 KiB); run() holds the answer's phase to 16 x + 64 KiB itself.
  allowance: (bytes) => 16 * bytes.length + 64 * 1024 + 256 * 1024,
  valid: (bytes) => {
    const c = fromCase(bytes);
    return Buffer.from(c.stream).equals(validAnswer(c));
  },
  cases: withCorpus('modbus-answers', fc.oneof({ weight: 8, arbitrary: structured }, { weight: 1, arbitrary: fc.uint8Array({ maxLength: 600 }) })),
  run: (bytes) => runCase(fromCase(bytes)),
};

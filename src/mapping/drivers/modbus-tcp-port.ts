// Modbus TCP framing for modbus-serial, in place of its TcpPort: modbus-serial parses the PDUs
// (given to it as RTU frames, as its TcpPort does), this port cuts the MBAP frames and checks
// them first. Its own TcpPort waits for whatever length an MBAP header declares (up to 64 KiB),
// takes any protocol id and passes answers to transactions other than the one asked on. Here
// (Modbus Application Protocol v1.1b3 §4.1): the length after the MBAP header is 2 to 254
// bytes (the 260-byte ADU), refused at the header; the protocol id is 0; one request is
// outstanding and the answer carries its transaction id; a read answer's byte count is what
// its frame carries. Anything else is a ProtocolError:
// the port fails (`failure`), its socket closes, and the connection is lost at once.
import { EventEmitter } from 'node:events';
import type net from 'node:net';
import { ProtocolError } from '../../errors/errors.js';
import { wireLength } from './wire-length.js';

/** MBAP header: transaction id, protocol id, length (then the unit id, counted in the length). */
const MBAP_HEAD = 6;
/** Unit id + PDU: a PDU is at most 253 bytes, an ADU 260. */
const MAX_MBAP_LENGTH = 254;
const MIN_MBAP_LENGTH = 2;

/** The connection to the device failed or closed (not a malformed answer: that is a ProtocolError). */
export class ModbusLinkError extends Error {
  override readonly name = 'ModbusLinkError';
}

/** What the port needs of its socket. */
export type ModbusSocket = Pick<net.Socket, 'write' | 'destroy' | 'on' | 'once' | 'setNoDelay'>;

/** Modbus CRC-16 (polynomial 0xA001, initial 0xFFFF): modbus-serial checks it on what it is given. */
function crc16(bytes: Buffer): number {
  let crc = 0xffff;
  for (const byte of bytes) {
    crc ^= byte;
    for (let i = 0; i < 8; i++) crc = crc & 1 ? (crc >>> 1) ^ 0xa001 : crc >>> 1;
  }
  return crc;
}

/** The port's side of modbus-serial's port contract (what its ModbusRTU calls and sets). */
export class ModbusTcpPort extends EventEmitter {
  /** Set and read by modbus-serial: the transaction of the last answer, and of the next request. */
  _transactionIdRead = 1;
  _transactionIdWrite = 1;
  /** Why the port stopped: a ProtocolError, the socket's error, or its closing. */
  failure: Error | undefined;
  private socket: ModbusSocket | undefined;
  private opened = false;
  private buffered: Buffer = Buffer.alloc(0);
  /** The request waiting for its answer. */
  private outstanding: number | undefined;

  constructor(private readonly connect: () => ModbusSocket) {
    super();
  }

  get isOpen(): boolean {
    return this.opened && !this.failure;
  }

  open(callback: (err?: Error) => void): void {
    const socket = this.connect();
    this.socket = socket;
    socket.setNoDelay(true);
    socket.once('connect', () => {
      this.opened = true;
      callback();
    });
    socket.on('data', (chunk: Buffer) => this.received(chunk));
    socket.on('error', (err: Error) => {
      if (!this.opened) return callback(err);
      this.fail(new ModbusLinkError(`connection error: ${err.message}`));
    });
    socket.on('close', () => this.fail(new ModbusLinkError('connection closed by the device')));
  }

  /** An RTU request from modbus-serial (unit, PDU, CRC): sent as an MBAP frame. */
  write(data: Buffer): void {
    if (!this.isOpen || data.length < 4) return;
    const tid = this._transactionIdWrite;
    const frame = Buffer.alloc(MBAP_HEAD + data.length - 2);
    frame.writeUInt16BE(tid, 0);
    frame.writeUInt16BE(0, 2);
    frame.writeUInt16BE(data.length - 2, 4);
    data.copy(frame, MBAP_HEAD, 0, data.length - 2);
    this.outstanding = tid;
    // modbus-serial keys its transactions by this id; 256 of them at most, as its own TcpPort.
    this._transactionIdWrite = (tid + 1) % 256;
    this.socket!.write(frame);
  }

  close(callback?: () => void): void {
    this.end();
    callback?.();
  }

  destroy(callback?: () => void): void {
    this.end();
    callback?.();
  }

  private end(): void {
    this.failure ??= new ModbusLinkError('closed');
    this.socket?.destroy();
  }

  private fail(err: Error): void {
    if (this.failure) return;
    this.failure = err;
    this.socket?.destroy();
    this.emit('close');
  }

  private received(chunk: Buffer): void {
    if (this.failure) return;
    this.buffered = this.buffered.length ? Buffer.concat([this.buffered, chunk]) : chunk;
    try {
      while (this.buffered.length >= MBAP_HEAD) {
        const tid = this.buffered.readUInt16BE(0);
        if (this.buffered.readUInt16BE(2) !== 0) throw new ProtocolError('Modbus', `MBAP protocol id ${this.buffered.readUInt16BE(2)}, not Modbus (0)`);
        const length = wireLength('Modbus', 'MBAP length', this.buffered.readUInt16BE(4), { min: MIN_MBAP_LENGTH, cap: MAX_MBAP_LENGTH });
        if (this.buffered.length < MBAP_HEAD + length) return;
        const adu = this.buffered.subarray(MBAP_HEAD, MBAP_HEAD + length);
        this.buffered = this.buffered.subarray(MBAP_HEAD + length);
        if (tid !== this.outstanding) throw new ProtocolError('Modbus', this.outstanding === undefined ? `an answer to transaction ${tid}, none was asked` : `an answer to transaction ${tid}, ${this.outstanding} was asked`);
        this.outstanding = undefined;
        // A read answer's byte count is the rest of its frame: modbus-serial loops over the
        // count it declares (up to 255 bytes, 2,040 bits) without looking at the frame.
        const fc = adu[1];
        if (fc !== undefined && fc >= 1 && fc <= 4 && adu.length >= 3 && adu[2] !== adu.length - 3) throw new ProtocolError('Modbus', `a byte count of ${adu[2]} in a frame that carries ${adu.length - 3}`);
        // As modbus-serial's parsers expect it: unit id, PDU, CRC.
        const rtu = Buffer.alloc(adu.length + 2);
        adu.copy(rtu);
        rtu.writeUInt16LE(crc16(adu), adu.length);
        this._transactionIdRead = tid;
        this.emit('data', rtu);
      }
    } catch (err) {
      this.fail(err as Error);
    }
  }
}

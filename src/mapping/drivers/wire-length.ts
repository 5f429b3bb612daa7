// The one way the device parsers (S7, EtherNet/IP/CIP, Modbus TCP) turn a length or a count read
// from the wire into something they buffer, copy, allocate or loop over: checked against the
// most the protocol and the connection's negotiated sizes allow (`cap`) and, for what must
// already be there, against the bytes that arrived. A declared length is never trusted beyond
// either: a frame that says it is longer is refused at its header, before its bytes are waited
// for or room is made for them (docs/mapping.md "Hostile devices").
import { ProtocolError } from '../../errors/errors.js';

export interface WireLengthBounds {
  /** The most the protocol and the negotiated sizes allow. */
  cap: number;
  /** The bytes there are to hold it (omit for a length still arriving: then only the cap applies). */
  available?: number;
  /** Bytes each counted unit takes of `available` (default 1: a byte length). */
  unit?: number;
  /** The least a valid one is (default 0). */
  min?: number;
}

/** `declared` when it is within the bounds; otherwise the protocol's ProtocolError naming `what`. */
export function wireLength(protocol: ProtocolError['protocol'], what: string, declared: number, bounds: WireLengthBounds): number {
  const { cap, available, unit = 1, min = 0 } = bounds;
  if (declared < min) throw new ProtocolError(protocol, `${what} of ${declared}, less than ${min}`);
  if (declared > cap) throw new ProtocolError(protocol, `${what} of ${declared}, more than the ${cap} the connection allows`);
  if (available !== undefined && declared * unit > available) throw new ProtocolError(protocol, `${what} of ${declared}, more than the ${available} bytes that arrived hold`);
  return declared;
}

// The bytes of one fuzz case. Every target takes its input as one byte string (what is saved as
// a regression and replayed), so a case carries, besides the device's bytes, what the parser is
// given beside them (the items asked for, the split points of the stream). A CaseWriter builds
// it from a generated structure; a CaseReader reads it back leniently: past the end it gives
// zeros and empty bytes, so any bytes at all are a case too (raw random input, truncated files).

export class CaseWriter {
  private readonly parts: Buffer[] = [];
  u8(n: number): this {
    this.parts.push(Buffer.from([n & 0xff]));
    return this;
  }
  u16(n: number): this {
    const b = Buffer.alloc(2);
    b.writeUInt16BE(n & 0xffff);
    this.parts.push(b);
    return this;
  }
  /** Bytes with their length first (u16). */
  bytes(b: Uint8Array): this {
    this.u16(b.length);
    this.parts.push(Buffer.from(b));
    return this;
  }
  /** Bytes to the end of the case (last). */
  rest(b: Uint8Array): Uint8Array {
    return new Uint8Array(Buffer.concat([...this.parts, Buffer.from(b)]));
  }
}

export class CaseReader {
  private at = 0;
  constructor(private readonly b: Uint8Array) {}
  u8(): number {
    return this.at < this.b.length ? this.b[this.at++]! : (this.at++, 0);
  }
  u16(): number {
    return (this.u8() << 8) | this.u8();
  }
  bytes(): Buffer {
    const n = this.u16();
    const out = Buffer.from(this.b.subarray(Math.min(this.at, this.b.length), Math.min(this.at + n, this.b.length)));
    this.at += n;
    return out;
  }
  rest(): Buffer {
    return Buffer.from(this.b.subarray(Math.min(this.at, this.b.length)));
  }
}

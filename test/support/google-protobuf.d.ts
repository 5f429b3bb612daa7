// The few members of Google's protobuf runtime (google-protobuf, which ships no types) that the
// tests' Sparkplug host uses to read and write the wire format by field number.
declare module 'google-protobuf' {
  export class BinaryReader {
    constructor(bytes: Uint8Array);
    nextField(): boolean;
    isEndGroup(): boolean;
    getFieldNumber(): number;
    skipField(): void;
    readUint32(): number;
    readUint64String(): string;
    readFloat(): number;
    readDouble(): number;
    readBool(): boolean;
    readString(): string;
    readBytes(): Uint8Array;
  }
  export class BinaryWriter {
    writeUint32(field: number, value: number): void;
    writeUint64(field: number, value: number): void;
    writeUint64String(field: number, value: string): void;
    writeFloat(field: number, value: number): void;
    writeDouble(field: number, value: number): void;
    writeBool(field: number, value: boolean): void;
    writeString(field: number, value: string): void;
    writeBytes(field: number, value: Uint8Array): void;
    getResultBuffer(): Uint8Array;
  }
  const pb: { BinaryReader: typeof BinaryReader; BinaryWriter: typeof BinaryWriter };
  export default pb;
}

// MQTT over WebSocket: the byte stream aedes reads, from a ws connection. Instead of ws's
// createWebSocketStream: aedes reads on 'readable' with read(null), and on Node 26 a 'readable'
// is lost when several WebSocket messages (an MQTT client writing one packet in pieces) are
// pushed in one tick, so the CONNACK never came. Messages of one tick are pushed as one chunk.
import { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';

export function mqttStreamOf(ws: WebSocket): Duplex {
  let pending: Buffer[] = [];
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (pending.length === 0) return;
    const chunk = pending.length === 1 ? pending[0]! : Buffer.concat(pending);
    pending = [];
    // Backpressure: stop reading the WebSocket until aedes reads again.
    if (!stream.push(chunk)) ws.pause();
  };
  const stream = new Duplex({
    read() {
      ws.resume();
    },
    write(chunk: Buffer, _encoding, callback) {
      ws.send(chunk, { binary: true }, callback);
    },
    final(callback) {
      ws.close();
      callback();
    },
    destroy(err, callback) {
      ws.terminate();
      callback(err);
    },
  });
  ws.on('message', (data: Buffer | ArrayBuffer | Buffer[]) => {
    pending.push(Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data));
    if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  });
  ws.once('close', () => {
    flush();
    stream.push(null);
  });
  ws.on('error', (err) => stream.destroy(err));
  return stream;
}

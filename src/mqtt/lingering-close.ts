// After the broker sends a DISCONNECT it closes the connection gently: it ends its side (FIN) and
// reads and discards what the client still sends until the client closes, for at most
// LINGER_MS, then destroys the socket. Destroyed at once, a socket with unread bytes in its
// receive buffer (a PUBREL the client sent before it read the DISCONNECT) goes out with a TCP
// RST, and an RST lets the client's kernel drop what it had not read yet — the DISCONNECT and
// its reason code (0x93 receive maximum exceeded, 0x95 packet too large, 0x8B shutting down):
// the client only sees "connection reset" (Paho test_flow_control2). The lingering close of
// HTTP servers (Apache's lingering_close), for the same reason.
import net from 'node:net';

const LINGER_MS = 500;
const LINGERING = Symbol('gatewayd.lingering');

type LingeringSocket = net.Socket & { [LINGERING]?: true };

function discard(): void {}

/** The next destroy() of `conn` (aedes' close) lingers; a plain stream (WebSocket) is left as it is. */
export function lingerAfterDisconnect(conn: object): void {
  if (!(conn instanceof net.Socket)) return;
  const socket = conn as LingeringSocket;
  if (socket[LINGERING]) return;
  socket[LINGERING] = true;
  const destroy = socket.destroy;
  socket.destroy = function lingeringDestroy(this: net.Socket, error?: Error) {
    socket.destroy = destroy;
    if (error !== undefined || socket.destroyed || !socket.writable) return destroy.call(socket, error);
    const done = () => {
      clearTimeout(timer);
      if (!socket.destroyed) destroy.call(socket);
    };
    const timer = setTimeout(done, LINGER_MS);
    timer.unref();
    socket.removeAllListeners('data');
    socket.on('data', discard);
    socket.once('end', done);
    socket.once('error', done);
    socket.end();
    socket.resume();
    return socket;
  };
}

/**
 * One socket write per turn of amqplib's frame pump instead of one per frame.
 *
 * amqplib queues each frame (an ack, a publish's three frames, a heartbeat) on its channel's
 * buffer and writes them to the socket from a setImmediate, one `write()` each, and node sends each
 * of those as its own system call. A consumer that settles a hundred messages in one turn therefore
 * made a hundred writes. Corking the socket at the first write and uncorking it on the next tick
 * (right after the pump's synchronous loop returns: `TickCork`) hands node the whole turn as one
 * `writev`.
 *
 * The socket is amqplib's `connection.stream` (not part of its typed API): when it is not a
 * writable stream, nothing is changed and frames go out one write each as before.
 */
import { Writable } from 'node:stream';
import type { ChannelModel } from 'amqplib';
import { TickCork } from '@sts/common';

type Write = Writable['write'];

/** Coalesces the writes of one turn on the connection's socket; false when the socket was not found. */
export function coalesceWrites(conn: ChannelModel): boolean {
  const stream = (conn as unknown as { connection?: { stream?: unknown } }).connection?.stream;
  if (!(stream instanceof Writable)) return false;
  const write: Write = stream.write.bind(stream);
  const tick = new TickCork(stream);
  stream.write = ((...args: Parameters<Write>) => {
    tick.cork();
    return write(...args);
  }) as Write;
  return true;
}

/** A TCP proxy a test can cut, to lose connections without disturbing the shared services. */
import net from 'node:net';

/**
 * A TCP proxy in front of a server (the broker, a database): a test can cut() it to simulate a
 * lost connection without touching the shared server. cut() drops every connection and refuses
 * new ones until restore(); blackhole() silently drops what clients send.
 */
export class TcpProxy {
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  private accepting = true;
  private blackholed = false;
  private frozen = false;
  port = 0;

  constructor(
    private readonly upstreamHost: string,
    private readonly upstreamPort: number,
  ) {}

  static forAmqpUrl(amqpUrl: string): TcpProxy {
    const u = new URL(amqpUrl);
    return new TcpProxy(u.hostname, Number(u.port || 5672));
  }

  async listen(): Promise<void> {
    this.server = net.createServer((client) => {
      if (!this.accepting) {
        client.destroy();
        return;
      }
      const upstream = net.connect(this.upstreamPort, this.upstreamHost);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
      // client -> server bytes are dropped while black-holed (the connection is cut right after)
      client.on('data', (chunk: Buffer) => {
        if (!this.blackholed && !this.frozen) upstream.write(chunk);
      });
      // server -> client as pipe() would (backpressure kept), dropped while frozen
      upstream.on('data', (chunk: Buffer) => {
        if (this.frozen || client.write(chunk)) return;
        upstream.pause();
        client.once('drain', () => upstream.resume());
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as net.AddressInfo).port;
  }

  /** The given URL (same credentials, vhost or database) routed through this proxy. */
  urlFor(url: string): string {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.toString();
  }

  get openConnections(): number {
    return this.sockets.size;
  }

  /** Silently drops what clients send from now on (nothing reaches the server) until cut(). */
  blackhole(): void {
    this.blackholed = true;
  }

  /** Silently drops every byte both ways from now on, closing nothing: a peer that vanished. */
  freeze(): void {
    this.frozen = true;
  }

  /** Lets bytes through again after blackhole() or freeze(), cutting nothing (what was dropped stays lost). */
  resume(): void {
    this.blackholed = false;
    this.frozen = false;
  }

  cut(): void {
    this.accepting = false;
    this.blackholed = false;
    for (const s of this.sockets) s.destroy();
  }

  restore(): void {
    this.accepting = true;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

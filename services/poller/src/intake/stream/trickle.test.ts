/**
 * The filtered stream's liveness is a line end: a peer that sends bytes of a line and never ends
 * it is not alive (the connection's stall detection drops it), and the position a gap is
 * recovered from stays at the last line end.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createXClient } from '@sts/social';
import { waitFor } from '@sts/testing';
import { createXStreamApi } from '@sts/x-stream/src/xStreamApi';

describe('the filtered stream and an unfinished line', () => {
  let server: Server;
  let url: string;
  let response: ServerResponse | null = null;

  beforeAll(async () => {
    server = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('\r\n');
      response = res;
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    response?.end();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  it('counts line ends as activity, not the bytes of a line still arriving', async () => {
    const client = createXClient({ baseUrl: url, bearerToken: 't' });
    const api = createXStreamApi({ client, baseUrl: url, bearerToken: 't' });
    let activity = 0;
    const tweets: string[] = [];
    const abort = new AbortController();
    const { closed } = await api.connect(
      { onTweet: (t) => void tweets.push(t.id), onActivity: () => void activity++ },
      abort.signal,
    );
    await waitFor(() => activity === 1); // the keep-alive
    const line = JSON.stringify({
      data: { id: '1001', text: 'slow', author_id: '7', created_at: '2026-12-02T00:00:00.000Z' },
      includes: { users: [{ id: '7', username: 'alice', name: 'Alice' }] },
    });
    for (const piece of [line.slice(0, 10), line.slice(10, 40)]) {
      response!.write(piece);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(activity).toBe(1);
    response!.write(`${line.slice(40)}\r\n`);
    await waitFor(() => tweets.length === 1);
    expect(activity).toBe(2);
    abort.abort();
    await closed.catch(() => undefined);
  });
});

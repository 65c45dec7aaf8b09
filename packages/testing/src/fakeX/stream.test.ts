import { createFakeStream, startFakeX, type FakeStream, type FakeX } from './index';
import { waitFor } from '../wait';
import { collectStream, type CollectedStream } from './collect';

const AUTH = { authorization: 'Bearer test-token' };
let fake: FakeX;
let stream: FakeStream;

beforeEach(async () => {
  stream = createFakeStream({ keepAliveMs: 100, maxRules: 3, maxRuleLength: 40 });
  fake = await startFakeX({ routes: stream.routes, limits: { stream_connect: 5 } });
  fake.state.addUser({ username: 'Alice' });
  fake.state.addUser({ username: 'bob' });
});
afterEach(() => fake.stop());

async function rules(body?: unknown, query = ''): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${fake.url}/2/tweets/search/stream/rules${query}`, {
    method: body ? 'POST' : 'GET',
    headers: { ...AUTH, 'content-type': 'application/json' },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

/** an open stream connection collecting what it receives */
function connect(extra = ''): Promise<CollectedStream> {
  return collectStream(
    `${fake.url}/2/tweets/search/stream?expansions=author_id&tweet.fields=author_id,created_at${extra}`,
    AUTH,
  );
}

describe('fake X filtered stream rules', () => {
  it('adds, lists and deletes rules with X meta.summary, dry_run changing nothing', async () => {
    const dry = await rules({ add: [{ value: 'from:alice', tag: 'sts:a' }] }, '?dry_run=true');
    expect(dry.json.meta).toMatchObject({ summary: { created: 0, valid: 1, invalid: 0 } });
    expect((await rules()).json).toMatchObject({ meta: { result_count: 0 } });

    const added = await rules({ add: [{ value: 'from:alice OR from:bob', tag: 'sts:a' }] });
    expect(added.status).toBe(200);
    expect(added.json.meta).toMatchObject({ summary: { created: 1, not_created: 0, valid: 1, invalid: 0 } });
    const [rule] = added.json.data as { id: string; value: string; tag: string }[];
    expect(rule).toMatchObject({ value: 'from:alice OR from:bob', tag: 'sts:a' });
    expect((await rules()).json).toMatchObject({ data: [rule], meta: { result_count: 1 } });

    const dup = await rules({ add: [{ value: 'from:alice OR from:bob' }] });
    expect(dup.json.errors).toEqual([expect.objectContaining({ title: 'DuplicateRule', id: rule!.id })]);
    expect(dup.json.meta).toMatchObject({ summary: { created: 0, not_created: 1, invalid: 1 } });

    const deleted = await rules({ delete: { ids: [rule!.id, '42'] } });
    expect(deleted.json.meta).toMatchObject({ summary: { deleted: 1, not_deleted: 1 } });
    expect((await rules()).json).toMatchObject({ meta: { result_count: 0 } });
  });

  it('refuses invalid rules, too-long rules and more than the rule cap; an empty body is a 400', async () => {
    const bad = await rules({
      add: [{ value: 'has:links' }, { value: `from:${'a'.repeat(15)} OR from:${'b'.repeat(15)} OR from:c` }],
    });
    expect(bad.json.meta).toMatchObject({ summary: { created: 0, invalid: 2 } });
    expect(stream.rules()).toHaveLength(0);
    const cap = await rules({
      add: [{ value: 'from:a' }, { value: 'from:b' }, { value: 'from:c' }, { value: 'from:d' }],
    });
    expect(cap.status).toBe(400);
    expect(cap.json.title).toBe('RulesCapExceeded');
    expect((await rules({})).status).toBe(400);
    expect(fake.requests.count({ family: 'rules' })).toBe(3);
  });
});

describe('fake X filtered stream rules with parts (X rule syntax)', () => {
  it('accepts from: groups with is:/lang: parts; refuses parts alone, negated groups, unbalanced ones', async () => {
    const wide = createFakeStream({ maxRuleLength: 1024 });
    const other = await startFakeX({ routes: wide.routes });
    try {
      const add = async (value: string) => {
        const res = await fetch(`${other.url}/2/tweets/search/stream/rules`, {
          method: 'POST',
          headers: { ...AUTH, 'content-type': 'application/json' },
          body: JSON.stringify({ add: [{ value }] }),
        });
        return (await res.json()) as { data?: unknown[]; errors?: { details?: string[] }[] };
      };
      for (const value of [
        '(from:alice OR from:bob) -is:retweet',
        '(from:alice) -is:reply -is:quote (lang:de OR lang:en)',
        'from:alice lang:en',
        // a query monitor's rule: keywords and phrases stand alone, as on X
        '(launch OR "new release") rocket -giveaway lang:en',
      ])
        expect(await add(value)).toMatchObject({ data: [{ value }] });
      const refused = async (value: string, detail: RegExp) =>
        expect((await add(value)).errors?.[0]?.details?.[0]).toMatch(detail);
      await refused('-is:retweet', /standalone/);
      await refused('lang:en OR is:quote', /standalone/);
      await refused('-from:alice lang:en', /standalone/);
      await refused('-(from:alice OR from:bob)', /Negated groups/);
      await refused('(from:alice OR from:bob -is:retweet', /Unbalanced/);
      await refused('from:alice) lang:en', /Unbalanced/);
      await refused('(from:alice) has:links', /Unsupported operator/);
      await refused('-cats lang:en', /standalone/);
      await refused('(from:alice) is:verified', /Unsupported operator/);
      await refused('from:alice OR', /Empty clause/);
      expect(wide.rules()).toHaveLength(4);
    } finally {
      await other.stop();
    }
  });

  it('counts the whole value, parts included, toward the length limit', async () => {
    // 40 characters: from:alice (10) fits; with its parts it does not
    const long = '(from:alice) -is:retweet -is:reply lang:en';
    expect(long.length).toBeGreaterThan(40);
    const res = await rules({ add: [{ value: long }] });
    expect(res.json.errors).toEqual([expect.objectContaining({ details: ['Rule exceeds maximum length of 40'] })]);
    expect((await rules({ add: [{ value: '(from:alice) -is:retweet lang:en' }] })).json.data).toHaveLength(1);
  });

  it('streams only what a rule matches: -is:retweet keeps reposts out, lang: posts of other or no language', async () => {
    await rules({ add: [{ value: '(from:alice) -is:retweet', tag: 'sts:norts' }] });
    await rules({ add: [{ value: '(from:bob) lang:en', tag: 'sts:en' }] });
    const c = await connect();
    await waitFor(() => c.text().includes('\r\n'));
    const delivered: string[] = [];
    stream.on('delivered', (id: string) => delivered.push(id));
    const own = fake.state.post({ author: 'Alice', text: 'own words' });
    fake.state.post({ author: 'Alice', text: 'RT a post', references: [{ type: 'retweeted', id: own.id }] });
    const reply = fake.state.post({
      author: 'Alice',
      text: '@bob yes',
      references: [{ type: 'replied_to', id: own.id }],
    });
    const en = fake.state.post({ author: 'bob', text: 'hello', lang: 'en' });
    fake.state.post({ author: 'bob', text: 'hallo', lang: 'de' });
    fake.state.post({ author: 'bob', text: '...', lang: null });
    const last = fake.state.post({ author: 'bob', text: 'the end', lang: 'en' });
    await waitFor(() => delivered.includes(last.id));
    expect(delivered).toEqual([own.id, reply.id, en.id, last.id]);
    await waitFor(() => c.text().includes('the end'));
    const lines = c
      .text()
      .split('\r\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as { data: { id: string }; matching_rules: { tag: string }[] });
    expect(lines.map((l) => [l.data.id, l.matching_rules.map((r) => r.tag)])).toEqual([
      [own.id, ['sts:norts']],
      [reply.id, ['sts:norts']],
      [en.id, ['sts:en']],
      [last.id, ['sts:en']],
    ]);
    c.close();
  });
});

describe('fake X filtered stream connection', () => {
  it('delivers a matching tweet at once with matching_rules and includes, sends keep-alives, not others', async () => {
    await rules({ add: [{ value: 'from:alice', tag: 'sts:x' }] });
    const c = await connect();
    expect(c.status).toBe(200);
    await waitFor(() => c.text().includes('\r\n'));
    fake.state.post({ author: 'bob', text: 'not watched' });
    const t = fake.state.post({ author: 'Alice', text: 'hello stream' });
    await waitFor(() => c.text().includes('hello stream'));
    const lines = c
      .text()
      .split('\r\n')
      .filter((l) => l.trim() !== '');
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(line).toMatchObject({
      data: { id: t.id, text: 'hello stream', author_id: t.author_id },
      includes: { users: [{ username: 'Alice' }] },
      matching_rules: [{ id: stream.rules()[0]!.id, tag: 'sts:x' }],
    });
    c.close();
  });

  it('refuses a second connection with 429 TooManyConnections, frees the slot on close', async () => {
    const first = await connect();
    const second = await connect();
    expect(second.status).toBe(429);
    expect(await second.res.json()).toMatchObject({ connection_issue: 'TooManyConnections' });
    first.close();
    await waitFor(() => stream.connections() === 0);
    const third = await connect();
    expect(third.status).toBe(200);
    third.close();
  });

  it('a forced disconnect ends the response with the operational-disconnect message', async () => {
    await rules({ add: [{ value: 'from:alice' }] });
    const c = await connect();
    stream.disconnect();
    await waitFor(() => c.text().includes('operational-disconnect'));
    expect(stream.connections()).toBe(0);
  });

  it('a stall writes nothing more, keep-alives and tweets included', async () => {
    await rules({ add: [{ value: 'from:alice' }] });
    const c = await connect();
    await waitFor(() => c.text().includes('\r\n'));
    stream.stall();
    const before = c.text();
    fake.state.post({ author: 'Alice', text: 'lost to the stall' });
    await new Promise((r) => setTimeout(r, 300));
    expect(c.text()).toBe(before);
    expect(stream.connections()).toBe(1);
    c.close();
  });

  it('backfill_minutes replays the matching posts of the last minutes, oldest first, then streams; a bad value is a 400', async () => {
    await rules({ add: [{ value: 'from:alice' }] });
    const old = fake.state.post({ author: 'Alice', text: 'too old', createdAt: new Date(Date.now() - 3 * 60_000) });
    const a = fake.state.post({ author: 'Alice', text: 'missed one', createdAt: new Date(Date.now() - 90_000) });
    fake.state.post({ author: 'bob', text: 'not watched' });
    const b = fake.state.post({ author: 'Alice', text: 'missed two' });
    const bad = await connect('&backfill_minutes=6');
    expect(bad.status).toBe(400);
    const c = await connect('&backfill_minutes=2');
    expect(c.status).toBe(200);
    const live = fake.state.post({ author: 'Alice', text: 'live' });
    await waitFor(() => c.text().includes('"live"'));
    const ids = c
      .text()
      .split('\r\n')
      .filter((l) => l.trim() !== '')
      .map((l) => (JSON.parse(l) as { data: { id: string } }).data.id);
    expect(ids).toEqual([a.id, b.id, live.id]);
    expect(ids).not.toContain(old.id);
    c.close();
  });

  it('an outage ends the open connection and answers connects 503 until it is over', async () => {
    const c = await connect();
    expect(c.status).toBe(200);
    stream.outage(true);
    await waitFor(() => stream.connections() === 0);
    const refused = await connect();
    expect(refused.status).toBe(503);
    stream.outage(false);
    const back = await connect();
    expect(back.status).toBe(200);
    back.close();
  });
});

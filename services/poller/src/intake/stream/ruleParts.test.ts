/**
 * Monitor rule parts in the X `stream` mode, on the real PostgreSQL against the fake X's filtered stream
 * (which applies `-is:retweet`, `lang:` ... as X does): a target's rule carries the parts every
 * monitor of it allows and no more, so X streams less and no monitor misses a post; parts follow
 * filter changes within a sync; each (monitor, tweet) is still one hit and one event.
 */
import { createAccount, waitFor, type FakeStream, type FakeX } from '@sts/testing';
import type { Db } from '@sts/db';
import { parseRule } from '@sts/x-stream/src/domain/streamRules';
import { useStreamHarness } from '../../../test/streamMode';

const h = useStreamHarness('stream-parts-test');
// the harness's fields under short names, current in every test
let db: Db;
let fake: FakeX;
let stream: FakeStream;
/** tweet ids the fake wrote to the stream */
let streamed: string[];
beforeEach(() => {
  ({ db, fake, stream } = h);
  streamed = [];
  stream.on('delivered', (id: string) => streamed.push(id));
});
const startMode = (): void => void h.startMode();
const hitsOf = h.hitsOf.bind(h);

async function monitor(username: string, filters: { excludeTypes?: string[]; langs?: string[] } = {}) {
  if (!fake.state.user(username)) fake.state.addUser({ username });
  const account = await createAccount(db, 'starter');
  return db.monitor.create({
    data: { accountId: account.id, targetUsername: username, targetKey: username.toLowerCase(), ...filters },
  });
}

/** the value of the rule that holds `username` */
const ruleOf = (username: string): string | undefined =>
  stream.rules().find((r) => (parseRule({ value: r.value, tag: r.tag }) ?? []).includes(username))?.value;

const repostOf = (author: string, original: { id: string }) =>
  fake.state.post({ author, text: 'RT a post', references: [{ type: 'retweeted', id: original.id }] });

/** the stream is up and every rule-change backfill has run: what follows comes by the stream */
async function settled(usernames: string[]): Promise<void> {
  await waitFor(() => stream.connections() === 1 && usernames.every((u) => ruleOf(u) !== undefined));
  await waitFor(() => fake.requests.count({ family: 'search' }) >= 1);
  await new Promise((r) => setTimeout(r, 300));
}

describe('X stream mode: rule parts', () => {
  it('a reposts-excluding target streams no reposts; a target one monitor needs reposts of keeps them', async () => {
    const only = await monitor('NoReposts', { excludeTypes: ['reposts'] });
    const mixedOut = await monitor('Mixed', { excludeTypes: ['reposts', 'replies'] });
    const mixedAll = await monitor('Mixed');
    startMode();
    await settled(['noreposts', 'mixed']);
    expect(ruleOf('noreposts')).toBe('(from:noreposts) -is:retweet');
    expect(ruleOf('mixed')).not.toContain('is:');

    const own = fake.state.post({ author: 'NoReposts', text: 'own words' });
    const lostRepost = repostOf('NoReposts', own);
    const mixedOwn = fake.state.post({ author: 'Mixed', text: 'mixed words' });
    const mixedRepost = repostOf('Mixed', own);
    await waitFor(async () => (await hitsOf(mixedAll.id)).length === 2);
    await waitFor(async () => (await hitsOf(only.id)).length === 1);
    expect(streamed).toEqual(expect.arrayContaining([own.id, mixedOwn.id, mixedRepost.id]));
    // X left the repost out: it was never streamed (nor is it a hit)
    expect(streamed).not.toContain(lostRepost.id);
    expect(await hitsOf(only.id)).toEqual([own.id]);
    expect(await hitsOf(mixedOut.id)).toEqual([mixedOwn.id]);
    expect(await hitsOf(mixedAll.id)).toEqual([mixedOwn.id, mixedRepost.id].sort());
    expect(await db.outboxEvent.count()).toBe(await db.hit.count());
    expect(await db.hit.count()).toBe(4);
  });

  it('lang: goes upstream only when every monitor names languages, as their union', async () => {
    const en = await monitor('English', { langs: ['en'] });
    const deOnly = await monitor('Both', { langs: ['de'] });
    await monitor('Both', { langs: ['en'] });
    const any = await monitor('Half', { langs: ['en'] });
    const anyAll = await monitor('Half');
    startMode();
    await settled(['english', 'both', 'half']);
    expect(ruleOf('english')).toBe('(from:english) lang:en');
    expect(ruleOf('both')).toBe('(from:both) (lang:de OR lang:en)');
    expect(ruleOf('half')).not.toContain('lang:');

    const post = (author: string, lang: string | null) => fake.state.post({ author, text: `a post in ${lang}`, lang });
    const enPost = post('English', 'en');
    const frPost = post('English', 'fr');
    const noLang = post('English', null);
    const deBoth = post('Both', 'de');
    const frBoth = post('Both', 'fr');
    const frHalf = post('Half', 'fr');
    const enHalf = post('Half', 'en');
    await waitFor(async () => (await hitsOf(anyAll.id)).length === 2);
    await waitFor(() => streamed.includes(enPost.id) && streamed.includes(deBoth.id));
    for (const t of [frPost, noLang, frBoth]) expect(streamed).not.toContain(t.id);
    expect(streamed).toContain(frHalf.id);
    expect(await hitsOf(en.id)).toEqual([enPost.id]);
    expect(await hitsOf(deOnly.id)).toEqual([deBoth.id]);
    expect(await hitsOf(any.id)).toEqual([enHalf.id]);
    expect(await hitsOf(anyAll.id)).toEqual([frHalf.id, enHalf.id].sort());
    expect(await db.outboxEvent.count()).toBe(await db.hit.count());
  });

  it('parts follow filter changes within a sync: the target moves group, other rules stay', async () => {
    const m = await monitor('Changer', { excludeTypes: ['reposts'] });
    await monitor('Steady', { excludeTypes: ['reposts'] });
    await monitor('Plain');
    startMode();
    await settled(['changer', 'steady', 'plain']);
    // the two reposts-excluding targets share one rule
    expect(ruleOf('changer')).toBe('(from:changer OR from:steady) -is:retweet');

    const before = fake.state.post({ author: 'Changer', text: 'before' });
    const skipped = repostOf('Changer', before);
    await waitFor(async () => (await hitsOf(m.id)).length === 1);
    // past POLL_OVERLAP_SECONDS: the backfill after the rule change does not reach back to `skipped`
    await new Promise((r) => setTimeout(r, 2500));

    await db.monitor.update({ where: { id: m.id }, data: { excludeTypes: [] } });
    await waitFor(() => ruleOf('changer') !== undefined && !ruleOf('changer')!.includes('is:'));
    // it left its rule (rewritten without it) and joined the no-parts group's rule
    expect(ruleOf('steady')).toBe('(from:steady) -is:retweet');
    expect(ruleOf('changer')).toBe('from:plain OR from:changer');
    expect(stream.rules()).toHaveLength(2);
    await new Promise((r) => setTimeout(r, 300));
    const after = repostOf('Changer', before);
    await waitFor(() => streamed.includes(after.id));
    await waitFor(async () => (await hitsOf(m.id)).length === 2);
    expect(await hitsOf(m.id)).toEqual([before.id, after.id].sort());
    expect(streamed).not.toContain(skipped.id);
    expect(await db.outboxEvent.count()).toBe(await db.hit.count());
  });

  it('a gap backfill searches with the parts its targets allow: the posts they keep are one hit, no read of the rest', async () => {
    const only = await monitor('GapParts', { excludeTypes: ['reposts'] });
    const all = await monitor('GapAll');
    startMode();
    await settled(['gapparts', 'gapall']);
    await waitFor(
      async () => (await db.$queryRaw<unknown[]>`SELECT 1 FROM x_stream_state WHERE alive_at IS NOT NULL`).length === 1,
    );
    const searches = fake.requests.count({ family: 'search' });
    stream.disconnect();
    const own = fake.state.post({ author: 'GapParts', text: 'own words in the gap' });
    repostOf('GapParts', own);
    const other = fake.state.post({ author: 'GapAll', text: 'in the gap too' });
    await waitFor(async () => (await hitsOf(only.id)).length === 1 && (await hitsOf(all.id)).length === 1, 15_000);
    const queries = fake.requests.log
      .slice()
      .filter((r) => r.family === 'search')
      .slice(searches)
      .map((r) => r.params.get('query'));
    expect(queries).toEqual(expect.arrayContaining(['(from:gapparts) -is:retweet', 'from:gapall']));
    expect(await hitsOf(only.id)).toEqual([own.id]);
    expect(await hitsOf(all.id)).toEqual([other.id]);
    expect(await db.outboxEvent.count()).toBe(await db.hit.count());
  });
});

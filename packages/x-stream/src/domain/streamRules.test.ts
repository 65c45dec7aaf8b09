import {
  inStream,
  packUsernames,
  parseRule,
  parseRuleGroup,
  planRules,
  ruleTag,
  ruleValue,
  wantedRules,
  type StreamRule,
} from './streamRules';

const now = new Date('2026-05-01T12:00:00.000Z');
let nextId = 1;

/** what X would hold after applying a plan to `current` */
function apply(current: StreamRule[], plan: ReturnType<typeof planRules>): StreamRule[] {
  const gone = new Set(plan.delete);
  return [
    ...current.filter((r) => !gone.has(r.id)),
    ...plan.add.map((r) => ({ id: String(nextId++), value: r.value, tag: r.tag })),
  ];
}

function covered(rules: StreamRule[]): string[] {
  return rules.flatMap((r) => parseRule(r) ?? []).sort();
}

const names = (n: number, prefix = 'user'): string[] =>
  Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(5, '0')}`);

describe('inStream', () => {
  it('takes targets with a Starter or active-trial watcher, not Free-only ones', () => {
    expect(inStream([{ plan: 'free', trialEndsAt: null }], now)).toBe(false);
    expect(inStream([{ plan: 'free', trialEndsAt: new Date(now.getTime() - 1) }], now)).toBe(false);
    expect(inStream([{ plan: 'free', trialEndsAt: new Date(now.getTime() + 1000) }], now)).toBe(true);
    expect(
      inStream(
        [
          { plan: 'free', trialEndsAt: null },
          { plan: 'starter', trialEndsAt: null },
        ],
        now,
      ),
    ).toBe(true);
  });
});

describe('rule values', () => {
  it('joins from: clauses with OR and parses back only rules carrying our tag', () => {
    const value = ruleValue(['alice', 'Bob']);
    expect(value).toBe('from:alice OR from:Bob');
    expect(parseRule({ value, tag: ruleTag(value) })).toEqual(['alice', 'bob']);
    expect(parseRule({ value, tag: 'someone-else' })).toBeNull();
    expect(parseRule({ value: 'cats OR dogs', tag: ruleTag('x') })).toBeNull();
    expect(ruleTag(value)).toBe(ruleTag(value));
    expect(ruleTag(value)).not.toBe(ruleTag('from:alice'));
  });

  it('packs greedily without ever passing the length limit', () => {
    const all = names(500);
    for (const max of [20, 64, 512, 1024]) {
      const groups = packUsernames(all, max);
      expect(groups.flat()).toEqual(all);
      for (const g of groups) expect(ruleValue(g).length).toBeLessThanOrEqual(max);
      // greedy: the next username would not have fitted in the group before it
      for (let i = 0; i + 1 < groups.length; i++) {
        expect(ruleValue([...groups[i]!, groups[i + 1]![0]!]).length).toBeGreaterThan(max);
      }
    }
    // ~20 targets of 9 characters per 512-character rule, ~55 per 1,024
    expect(packUsernames(all, 1024)).toHaveLength(Math.ceil(500 / 56));
  });
});

describe('planRules', () => {
  it('covers every wanted username from nothing, each rule within the limit and tagged', () => {
    const plan = planRules([], names(1000), 1024, 1000);
    expect(plan.delete).toEqual([]);
    expect(plan.overflow).toEqual([]);
    expect(plan.add.length).toBe(Math.ceil(1000 / 56));
    for (const r of plan.add) {
      expect(r.value.length).toBeLessThanOrEqual(1024);
      expect(r.tag).toBe(ruleTag(r.value));
    }
    expect(covered(apply([], plan))).toEqual(names(1000));
  });

  it('changes nothing when the rules already cover the targets', () => {
    const rules = apply([], planRules([], names(300), 512, 1000));
    const again = planRules(rules, names(300), 512, 1000);
    expect(again.add).toEqual([]);
    expect(again.delete).toEqual([]);
  });

  it('adds one target by rewriting at most one rule, and removes one the same way', () => {
    const rules = apply([], planRules([], names(300), 512, 1000));
    const plus = planRules(rules, [...names(300), 'newcomer'], 512, 1000);
    expect(plus.add).toHaveLength(1);
    expect(plus.delete.length).toBeLessThanOrEqual(1);
    const after = apply(rules, plus);
    expect(covered(after)).toEqual([...names(300), 'newcomer'].sort());

    const left = [...names(300), 'newcomer'].filter((u) => u !== 'user00007');
    const minus = planRules(after, left, 512, 1000);
    expect(minus.delete).toHaveLength(1);
    expect(minus.add).toHaveLength(1);
    expect(covered(apply(after, minus))).toEqual(left.sort());
  });

  it('deletes a rule no target needs, and rules that are not ours', () => {
    const rules = apply([], planRules([], ['alice', 'bob'], 20, 10));
    expect(rules).toHaveLength(2);
    const foreign = { id: 'f1', value: 'cats', tag: 'theirs' };
    const plan = planRules([...rules, foreign], ['alice'], 20, 10);
    expect(plan.add).toEqual([]);
    expect(plan.delete.sort()).toEqual([rules.find((r) => r.value === 'from:bob')!.id, 'f1'].sort());
  });

  it('rewrites rules longer than a lowered X_RULE_MAX_LENGTH', () => {
    const rules = apply([], planRules([], names(100), 1024, 1000));
    const plan = planRules(rules, names(100), 256, 1000);
    expect(plan.delete.sort()).toEqual(rules.map((r) => r.id).sort());
    const after = apply(rules, plan);
    for (const r of after) expect(r.value.length).toBeLessThanOrEqual(256);
    expect(covered(after)).toEqual(names(100));
  });

  it('beyond X_MAX_RULES returns the overflow explicitly and never exceeds the rule count', () => {
    const plan = planRules([], names(100), 64, 3);
    const after = apply([], plan);
    expect(after).toHaveLength(3);
    const inRules = covered(after);
    expect([...inRules, ...plan.overflow].sort()).toEqual(names(100));
    expect(plan.overflow.length).toBe(100 - inRules.length);
    // the kept rules stay; the overflow is stable from one sync to the next
    const again = planRules(after, names(100), 64, 3);
    expect(again.add).toEqual([]);
    expect(again.delete).toEqual([]);
    expect(again.overflow).toEqual(plan.overflow);
  });

  it('leaves out usernames X could not match (invalid) and duplicates across rules', () => {
    const dup: StreamRule[] = [
      { id: 'a', value: 'from:alice', tag: ruleTag('from:alice') },
      { id: 'b', value: 'from:alice OR from:bob', tag: ruleTag('from:alice OR from:bob') },
    ];
    const plan = planRules(dup, ['alice', 'bob', 'not a name', 'much_too_long_username'], 1024, 10);
    const after = apply(dup, plan);
    expect(covered(after)).toEqual(['alice', 'bob']);
  });
});

describe('rule parts: targets grouped by what all their monitors allow', () => {
  const starter = [{ plan: 'starter' as const, trialEndsAt: null }];
  const m = (excludeTypes: string[] = [], langs: string[] = []) => ({ excludeTypes, langs });
  const NO_REPOSTS = ['-is:retweet'];
  const EN = ['lang:en'];

  it('wantedRules: the parts every monitor of a target allows, streamed targets only', () => {
    const wanted = wantedRules(
      [
        { targetKey: 'only', accounts: starter, monitors: [m(['reposts']), m(['reposts', 'replies'])] },
        { targetKey: 'mixed', accounts: starter, monitors: [m(['reposts']), m()] },
        { targetKey: 'langs', accounts: starter, monitors: [m([], ['en']), m(['quotes'], ['de'])] },
        { targetKey: 'halflang', accounts: starter, monitors: [m([], ['en']), m()] },
        { targetKey: 'freeonly', accounts: [{ plan: 'free', trialEndsAt: null }], monitors: [m(['reposts'])] },
      ],
      now,
    );
    expect([...wanted]).toEqual([
      ['only', ['-is:retweet']],
      ['mixed', []],
      ['langs', ['(lang:de OR lang:en)']],
      ['halflang', []],
    ]);
  });

  it('one group per set of parts: `(from:a OR from:b) <parts>`, each within the limit, greedy, tagged by group', () => {
    const wanted = new Map<string, string[]>([
      ...names(40, 'plain').map((u): [string, string[]] => [u, []]),
      ...names(40, 'norts').map((u): [string, string[]] => [u, NO_REPOSTS]),
      ...names(40, 'en').map((u): [string, string[]] => [u, [...NO_REPOSTS, ...EN]]),
    ]);
    const plan = planRules([], wanted, 64, 1000);
    const after = apply([], plan);
    expect(covered(after)).toEqual([...wanted.keys()].sort());
    const byKey = new Map<string, StreamRule[]>();
    for (const r of after) {
      expect(r.value.length).toBeLessThanOrEqual(64);
      const g = parseRuleGroup(r)!;
      // every username of a rule wants exactly the rule's parts
      for (const u of g.usernames) expect(wanted.get(u)!.join(' ')).toBe(g.key);
      expect(r.tag).toBe(ruleTag(r.value, g.key));
      byKey.set(g.key, [...(byKey.get(g.key) ?? []), r]);
    }
    expect([...byKey.keys()].sort()).toEqual(['', '-is:retweet', '-is:retweet lang:en']);
    expect(byKey.get('')![0]!.value).toMatch(/^from:plain\d+ OR from:plain\d+/);
    expect(byKey.get('-is:retweet')![0]!.value).toMatch(/^\(from:norts\d+ OR from:norts\d+.*\) -is:retweet$/);
    expect(byKey.get('-is:retweet lang:en')![0]!.value).toMatch(/\) -is:retweet lang:en$/);
    // the tags of one group share their group part; groups differ
    const prefixes = [...byKey.values()].map((rules) => new Set(rules.map((r) => r.tag!.split(':')[1]!)));
    for (const set of prefixes.slice(1)) expect(set.size).toBe(1);
    // greedy within each group: the next username of the group would not have fitted
    for (const [key, rules] of byKey) {
      const parts = key === '' ? [] : key.split(' ');
      const lists = rules.map((r) => parseRule(r)!);
      for (let i = 0; i + 1 < lists.length; i++)
        expect(ruleValue([...lists[i]!, lists[i + 1]![0]!], parts).length).toBeGreaterThan(64);
    }
    // and nothing to do on the next sync
    const again = planRules(after, wanted, 64, 1000);
    expect(again.add).toEqual([]);
    expect(again.delete).toEqual([]);
  });

  it('a target whose filters change moves between groups: at most two rules rewritten, the other groups untouched', () => {
    const wanted = new Map<string, string[]>([
      ...names(30, 'plain').map((u): [string, string[]] => [u, []]),
      ...names(30, 'norts').map((u): [string, string[]] => [u, NO_REPOSTS]),
      ...names(30, 'en').map((u): [string, string[]] => [u, EN]),
    ]);
    const rules = apply([], planRules([], wanted, 128, 1000));
    // plain00003's monitors now all exclude reposts
    const moved = new Map(wanted).set('plain00003', NO_REPOSTS);
    const plan = planRules(rules, moved, 128, 1000);
    // its old rule rewritten without it; it joins the roomiest -is:retweet rule (rewritten) or a new one
    expect(plan.delete.length).toBeGreaterThanOrEqual(1);
    expect(plan.delete.length).toBeLessThanOrEqual(2);
    expect(plan.add).toHaveLength(2);
    const after = apply(rules, plan);
    const ruleOf = (rs: StreamRule[], u: string) => rs.find((r) => parseRule(r)!.includes(u))!;
    expect(ruleOf(after, 'plain00003').value).toMatch(/\) -is:retweet$/);
    expect(ruleOf(after, 'plain00004').value).not.toContain('is:');
    expect(covered(after)).toEqual([...wanted.keys()].sort());
    // the lang:en group's rules are the same rules (same ids)
    const enIds = (rs: StreamRule[]) => rs.filter((r) => r.value.endsWith('lang:en')).map((r) => r.id);
    expect(enIds(after)).toEqual(enIds(rules));
    // and back again when the filters are undone
    const back = planRules(after, wanted, 128, 1000);
    expect(back.delete.length).toBeLessThanOrEqual(2);
    expect(back.add.length).toBeLessThanOrEqual(2);
    expect(ruleOf(apply(after, back), 'plain00003').value).not.toContain('is:');
  });

  it('rules written before rule parts existed (no parts, old tags) stay as they are while no monitor has filters', () => {
    const old = apply([], planRules([], names(50), 256, 1000));
    for (const r of old) expect(r.tag).toMatch(/^sts:[0-9a-f]{16}$/);
    const plan = planRules(old, new Map(names(50).map((u) => [u, []])), 256, 1000);
    expect(plan.add).toEqual([]);
    expect(plan.delete).toEqual([]);
  });

  it('parts that leave no room for a username are dropped from the end (the language list first)', () => {
    const langs = [
      '-is:retweet',
      `(${['de', 'en', 'es', 'fr', 'it', 'ja', 'nl', 'pt'].map((l) => `lang:${l}`).join(' OR ')})`,
    ];
    const plan = planRules([], new Map([['someone_long_15', langs]]), 64, 10);
    expect(plan.add.map((r) => r.value)).toEqual(['(from:someone_long_15) -is:retweet']);
    const tiny = planRules([], new Map([['someone_long_15', langs]]), 20, 10);
    expect(tiny.add.map((r) => r.value)).toEqual(['from:someone_long_15']);
  });

  it('beyond X_MAX_RULES the overflow is explicit across groups and the rule count holds', () => {
    const wanted = new Map<string, string[]>([
      ...names(20, 'plain').map((u): [string, string[]] => [u, []]),
      ...names(20, 'norts').map((u): [string, string[]] => [u, NO_REPOSTS]),
    ]);
    const plan = planRules([], wanted, 64, 3);
    const after = apply([], plan);
    expect(after).toHaveLength(3);
    expect([...covered(after), ...plan.overflow].sort()).toEqual([...wanted.keys()].sort());
    const again = planRules(after, wanted, 64, 3);
    expect(again.add).toEqual([]);
    expect(again.overflow).toEqual(plan.overflow);
  });
});

import { inStream, packUsernames, parseRule, planRules, ruleTag, ruleValue, type StreamRule } from './streamRules';

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

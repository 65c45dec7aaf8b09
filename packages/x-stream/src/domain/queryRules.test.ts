/** Query monitors' stream rules (no I/O): which monitors want one, their value and tag, the plan under the rule cap. */
import { parseQuery } from '@sts/core';
import { planQueryRules, queryRuleMonitor, wantedQueryRules, type QueryCandidate } from './queryRules';

const now = new Date('2026-11-26T12:00:00Z');
const starter = { plan: 'starter' as const, trialEndsAt: null };
const monitor = (id: string, query: string, account: QueryCandidate['account'] = starter): QueryCandidate => ({
  id,
  query,
  account,
});

describe('query monitors as stream rules', () => {
  it('a Starter or trial monitor wants its query as X reads it, tagged with its id; Free and broken ones none', () => {
    const { rules, tooLong } = wantedQueryRules(
      [
        monitor('a', '"new release" OR launch -giveaway lang:en'),
        monitor('b', 'rocket', { plan: 'free', trialEndsAt: new Date(now.getTime() + 1000) }),
        monitor('c', 'rocket', { plan: 'free', trialEndsAt: null }),
        monitor('d', 'has:links'),
        monitor('e', 'a much longer query than the rule length allows here'),
      ],
      now,
      48,
    );
    expect(rules.map((r) => [r.monitorId, r.value])).toEqual([
      ['a', parseQuery('"new release" OR launch -giveaway lang:en').rule],
      ['b', 'rocket'],
    ]);
    expect(rules[0]!.value).toBe('"new release" OR (launch -giveaway lang:en)');
    expect(rules.map((r) => queryRuleMonitor(r))).toEqual(['a', 'b']);
    expect(tooLong).toEqual(['e']);
    // a changed query is another tag: its rule is replaced
    const changed = wantedQueryRules([monitor('a', 'launch')], now, 40).rules[0]!;
    expect(changed.tag).not.toBe(rules[0]!.tag);
    expect(queryRuleMonitor({ tag: 'sts:0123abcd' })).toBeNull();
  });

  it('keeps the rules in force, deletes the unwanted, adds within the room; the rest overflows', () => {
    const wanted = wantedQueryRules(
      ['one', 'two', 'three', 'four'].map((q, i) => monitor(`m${i}`, q)),
      now,
      512,
    ).rules;
    const current = [
      { id: '1', value: wanted[0]!.value, tag: wanted[0]!.tag },
      { id: '2', value: 'gone', tag: 'sts:q:old:000000000000' },
    ];
    const plan = planQueryRules(current, wanted, 3);
    expect(plan.delete).toEqual(['2']);
    expect(plan.add.map((r) => r.monitorId)).toEqual(['m1', 'm2']);
    expect(plan.count).toBe(3);
    expect(plan.overflow).toEqual(['m3']);
    expect(planQueryRules(current, wanted, 0)).toMatchObject({ add: [], count: 1, overflow: ['m1', 'm2', 'm3'] });
  });
});

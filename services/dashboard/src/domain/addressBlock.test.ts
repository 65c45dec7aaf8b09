import { addressBlock } from './addressBlock';

describe('addressBlock (the sign-in throttle counts by it)', () => {
  it.each([
    ['198.51.100.7', '198.51.100.0/24'],
    ['198.51.100.250', '198.51.100.0/24'],
    ['::ffff:198.51.100.9', '198.51.100.0/24'],
    ['2001:db8:5:5::1', '2001:db8:5:5::/64'],
    ['2001:db8:5:5:ffff:1:2:3', '2001:db8:5:5::/64'],
    ['2001:0db8:0005:0006::1', '2001:db8:5:6::/64'],
    ['::1', '0:0:0:0::/64'],
  ])('%s is in %s', (address, block) => {
    expect(addressBlock(address)).toBe(block);
  });

  it('keeps blocks apart and never merges a non-address with one', () => {
    expect(addressBlock('198.51.101.7')).not.toBe(addressBlock('198.51.100.7'));
    expect(addressBlock('unknown')).toBe('other:unknown');
  });
});

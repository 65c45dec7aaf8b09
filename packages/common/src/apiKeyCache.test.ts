import { apiKeyCacheKey, evictCachedApiKey } from './apiKeyCache';

describe('the cached API-key lookup', () => {
  it('is named apikey:<hash> and evicted by deleting that key', async () => {
    const deleted: string[] = [];
    const redis = { del: (key: string) => Promise.resolve(deleted.push(key)) };
    expect(apiKeyCacheKey('ab12')).toBe('apikey:ab12');
    await expect(evictCachedApiKey(redis, 'ab12')).resolves.toBe(true);
    expect(deleted).toEqual(['apikey:ab12']);
  });

  it('resolves false, never throws, when Redis is not reachable', async () => {
    const redis = { del: () => Promise.reject(new Error('connect ECONNREFUSED')) };
    await expect(evictCachedApiKey(redis, 'ab12')).resolves.toBe(false);
  });
});

/**
 * A bounded cache for pure string functions on the delivery path (URL parsing for lane keys and
 * redaction ran several times per delivery, always on the same few URLs). Cleared whole when full:
 * the working set is the endpoints in use, and a miss only costs the parse again.
 */
export function memoizeString<A extends string>(fn: (key: A) => string, max = 10_000): (key: A) => string {
  const cache = new Map<string, string>();
  return (key) => {
    let value = cache.get(key);
    if (value === undefined) {
      value = fn(key);
      if (cache.size >= max) cache.clear();
      cache.set(key, value);
    }
    return value;
  };
}

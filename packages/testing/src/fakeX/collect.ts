/** A test's client of a fake X stream: one connection that collects everything it receives. */
export interface CollectedStream {
  status: number;
  res: Response;
  /** everything received so far */
  text: () => string;
  /** the lines received so far, keep-alives left out, parsed */
  lines: <T>() => T[];
  close: () => void;
}

/** Opens `url` and reads it to its end in the background (a refused connection: `status` only). */
export async function collectStream(url: string, headers: Record<string, string>): Promise<CollectedStream> {
  const abort = new AbortController();
  const res = await fetch(url, { headers, signal: abort.signal });
  let text = '';
  if (res.status === 200 && res.body) {
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    void (async () => {
      for (;;) {
        const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
        if (done) return;
        text += decoder.decode(value, { stream: true });
      }
    })();
  }
  const lines = <T>() =>
    text
      .split('\r\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as T);
  return { status: res.status, res, text: () => text, lines, close: () => abort.abort() };
}

/** A logger whose JSON lines a test can read back (what a service logs is behaviour too). */
import { Writable } from 'node:stream';
import { createLogger, type Logger } from '@sts/common';

export function capturingLogger(service = 'messaging-test'): {
  logger: Logger;
  lines: () => Record<string, unknown>[];
} {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer | string, _enc, cb) {
      chunks.push(chunk.toString());
      cb();
    },
  });
  const logger = createLogger({ service, level: 'debug', stream });
  return {
    logger,
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

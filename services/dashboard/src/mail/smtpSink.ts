/**
 * A local SMTP server that keeps what it receives (the `smtp-server` package): `npm start` runs
 * one when SMTP_URL is not set and prints each message's subject and links, and the tests read
 * the mails from it. Plain SMTP on 127.0.0.1, any or no credentials, no TLS.
 */
import type { AddressInfo } from 'node:net';
import { simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import { linksOf } from './templates';

export interface SinkMail {
  to: string;
  from: string;
  subject: string;
  text: string;
  html: string;
  messageId: string;
  links: string[];
}

export interface SmtpSink {
  url: string;
  port: number;
  mails: SinkMail[];
  /** resolves with the first mail (received already or later) that matches */
  waitFor(match: (m: SinkMail) => boolean, timeoutMs?: number): Promise<SinkMail>;
  stop(): Promise<void>;
}

export async function startSmtpSink(opts: { port?: number; onMail?: (m: SinkMail) => void } = {}): Promise<SmtpSink> {
  const mails: SinkMail[] = [];
  const waiters = new Set<() => void>();
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onAuth: (_auth, _session, cb) => cb(null, { user: 'sink' }),
    onData(stream, _session, cb) {
      simpleParser(stream)
        .then((parsed) => {
          const text = parsed.text ?? '';
          const to = Array.isArray(parsed.to) ? parsed.to.map((a) => a.text).join(', ') : (parsed.to?.text ?? '');
          const mail: SinkMail = {
            to,
            from: parsed.from?.text ?? '',
            subject: parsed.subject ?? '',
            text,
            html: typeof parsed.html === 'string' ? parsed.html : '',
            messageId: parsed.messageId ?? '',
            links: linksOf(text),
          };
          mails.push(mail);
          opts.onMail?.(mail);
          for (const w of waiters) w();
          cb();
        })
        .catch((err: unknown) => cb(err instanceof Error ? err : new Error(String(err))));
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', () => resolve());
  });
  const port = (server.server.address() as AddressInfo).port;
  return {
    url: `smtp://127.0.0.1:${port}`,
    port,
    mails,
    waitFor(match, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const found = mails.find(match);
          if (!found) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve(found);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(
            new Error(`no matching mail within ${timeoutMs} ms (got: ${mails.map((m) => m.subject).join(' | ')})`),
          );
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * `npm start` runs this when SMTP_URL is not set: a local SMTP sink on 127.0.0.1:MAIL_SINK_PORT
 * (default 2525) that prints each message's recipient, subject and links, so a newcomer can click
 * the verification link. Nothing is delivered anywhere.
 */
import { startSmtpSink } from './smtpSink';

const port = Number(process.env.MAIL_SINK_PORT ?? 2525);

startSmtpSink({
  port,
  onMail: (m) => {
    console.log(`mail to ${m.to}: ${m.subject}`);
    for (const link of m.links) console.log(`  ${link}`);
  },
})
  .then((sink) => {
    console.log(`local SMTP sink on ${sink.url}: mail is printed here, not sent`);
    const stop = () => void sink.stop().then(() => process.exit(0));
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  })
  .catch((err: unknown) => {
    console.error(
      `the local SMTP sink could not start on port ${port}: ${err instanceof Error ? err.message : String(err)}`,
    );
    process.exit(1);
  });

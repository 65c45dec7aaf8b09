/**
 * RabbitMQ restarted (rabbitmqctl stop_app / start_app) while hits flow through the dispatcher:
 * no hit is lost. Persistent messages on the durable queue survive the restart, the messaging
 * clients reconnect, and the publisher (like the outbox relay) re-publishes whatever the broker
 * did not confirm. Runs alone in the serial second pass (STS_DISRUPTIVE=1).
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { createLogger } from '@sts/common';
import {
  createAccount,
  createHit,
  createMonitor,
  type HitFixture,
  type HttpsReceiver,
  type MonitorFixture,
  type ServiceProcess,
  startHttpsReceiver,
  waitFor,
} from '@sts/testing';
import { spawnDispatcher } from '../test/dispatcher';
import { openBrokerBed, type BrokerBed } from '../test/brokerBed';

const run = promisify(execFile);
const logger = createLogger({ service: 'dispatcher-broker-test', level: 'error' });

jest.setTimeout(180_000);

describe('RabbitMQ restart while hits flow', () => {
  let bed: BrokerBed;
  let receiver: HttpsReceiver;
  let dispatcher: ServiceProcess | undefined;
  let monitor: MonitorFixture;

  beforeAll(async () => {
    bed = await openBrokerBed({ poolSize: 4, logger, name: 'test-publisher' });
    receiver = await startHttpsReceiver();
    receiver.setResponder(() => ({ status: 200, delayMs: 5 }));
    const account = await createAccount(bed.db, 'starter');
    monitor = await createMonitor(bed.db, bed.box, { accountId: account.id, url: `${receiver.url}/hook` });
  });

  afterAll(async () => {
    // whatever happened, leave the broker running for the rest of the run
    await run('rabbitmqctl', ['start_app']).catch(() => undefined);
    if (dispatcher && dispatcher.child.exitCode === null) {
      dispatcher.child.kill('SIGTERM');
      await dispatcher.exited;
    }
    await receiver.close();
    // the publisher may not stop cleanly after the restart; the database is dropped all the same
    await bed.close().catch(() => undefined);
  });

  it('loses no hit', async () => {
    dispatcher = await spawnDispatcher(bed.dispatcherEnv());
    const hits: HitFixture[] = [];
    for (let i = 0; i < 200; i++) hits.push(await createHit(bed.db, monitor, `hit ${i} #launch`));

    const published = new Set<string>();
    /** publishes until the broker confirms, with the same message id (what the outbox relay does) */
    const publishConfirmed = async (hit: HitFixture) => {
      const messageId = randomUUID();
      for (;;) {
        try {
          await bed.publisher.publish('monitor.hit', hit.payload, {
            messageId,
            headers: { accountId: monitor.accountId, hitId: hit.id },
          });
          published.add(messageId);
          return;
        } catch {
          await new Promise((r) => setTimeout(r, 200));
        }
      }
    };
    const publishing = (async () => {
      for (const h of hits) {
        await publishConfirmed(h);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();

    await waitFor(() => receiver.requests.length >= 30, 30_000, 5);
    await run('rabbitmqctl', ['stop_app']);
    await new Promise((r) => setTimeout(r, 1000));
    await run('rabbitmqctl', ['start_app']);
    await publishing;

    const received = () => new Set(receiver.requests.map((r) => String(r.headers['x-service-delivery'])));
    await waitFor(() => received().size >= published.size, 120_000, 100).catch((err: unknown) => {
      // what the dispatcher said last: the only way to tell a lost message from a stuck consumer
      console.log(
        `received ${received().size} of ${published.size}; the dispatcher's last lines:\n${dispatcher?.lines.slice(-60).join('\n')}`,
      );
      throw err;
    });
    expect(published.size).toBe(200);
    expect(received()).toEqual(published);
    await bed.allDelivered(published, 60_000);
    // the dispatcher is still consuming after the restart
    expect(dispatcher.child.exitCode).toBeNull();
  });
});

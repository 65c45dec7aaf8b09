/**
 * What this machine charges a node process for waking up: a child process that sends itself a UDP
 * datagram `rate` times a second (a timer, then the datagram's arrival: two wake-ups of the event
 * loop, nearly no work) and reports its CPU time per datagram. On a virtual machine an idle vCPU
 * that wakes pays for the exit from the hypervisor's halt and for cold caches, so this grows as the
 * rate falls; it is the floor under anything that handles events one at a time at that rate, e.g.
 * bench:pipeline's latency phase (a delivery there is at least three wake-ups: the message, the
 * answer, the committed row).
 */
import { execFileSync } from 'node:child_process';

const SCRIPT = `
const dgram = require('node:dgram');
const rx = dgram.createSocket('udp4');
const tx = dgram.createSocket('udp4');
let n = 0;
rx.on('message', () => n++);
rx.bind(0, '127.0.0.1', () => {
  const { port } = rx.address();
  const [rate, seconds] = process.argv.slice(1).map(Number);
  const t0 = process.cpuUsage();
  const timer = setInterval(() => tx.send('x', port, '127.0.0.1'), 1000 / rate);
  setTimeout(() => {
    clearInterval(timer);
    const u = process.cpuUsage(t0);
    process.stdout.write(String((u.user + u.system) / Math.max(n, 1)));
    process.exit(0);
  }, seconds * 1000);
});`;

/** CPU µs per timer-and-datagram round at `rate` per second, measured over `seconds` */
export function wakeCostMicros(rate: number, seconds = 3): number {
  const out = execFileSync(process.execPath, ['-e', SCRIPT, String(rate), String(seconds)], { encoding: 'utf8' });
  return Math.round(Number(out));
}

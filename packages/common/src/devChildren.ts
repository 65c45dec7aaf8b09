/**
 * `npm start`'s record of its children (scripts/start.mjs), so that a start after one that was
 * killed outright (SIGKILL, a crashed terminal: no chance to stop its children) stops what that
 * one left running, the dev mail sink holding its port among them. The record
 * (`.tmp/start-children.json`, git-ignored) lists each child's pid and the arguments it was started
 * with (`services/…/main.ts`, …); a recorded process is stopped only while it is still that child:
 * its command line (`/proc/<pid>/cmdline`) ends with those arguments and its working directory is
 * this checkout. A pid reused by any other process, or a service of another checkout, is left
 * alone. Linux only (/proc); elsewhere nothing can be checked, so nothing is stopped.
 */
import {
  existsSync,
  mkdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';

export interface RecordedChild {
  pid: number;
  /** the arguments after the runtime's own (`services/poller/src/main.ts`, `packages/admin-cli/src/main.ts demo run`) */
  args: string[];
}

/** where `npm start` keeps the record of `root`'s children */
export function childRecordFile(root: string): string {
  return path.join(root, '.tmp', 'start-children.json');
}

/** replaces the record with `children` (the live ones); an empty list removes it */
export function writeChildRecord(root: string, children: readonly RecordedChild[]): void {
  const file = childRecordFile(root);
  if (children.length === 0) {
    rmSync(file, { force: true });
    return;
  }
  mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}`;
  writeFileSync(tmp, `${JSON.stringify(children)}\n`);
  renameSync(tmp, file);
}

function readRecord(root: string): RecordedChild[] {
  const file = childRecordFile(root);
  if (!existsSync(file)) return [];
  try {
    const parsed: unknown = JSON.parse(readFileSync(file, 'utf8'));
    if (!Array.isArray(parsed)) return [];
    return parsed.filter(
      (c): c is RecordedChild =>
        typeof c === 'object' &&
        c !== null &&
        Number.isInteger((c as RecordedChild).pid) &&
        (c as RecordedChild).pid > 1 &&
        Array.isArray((c as RecordedChild).args) &&
        (c as RecordedChild).args.length > 0 &&
        (c as RecordedChild).args.every((a) => typeof a === 'string'),
    );
  } catch {
    return []; // a record cut short: nothing can be known from it
  }
}

/** whether `pid` runs, now, as the recorded child of `root` (false for any other process or none) */
export function isRecordedChild(root: string, child: RecordedChild): boolean {
  try {
    const stat = readFileSync(`/proc/${child.pid}/stat`, 'utf8');
    if (/^\d+ \(.*\) Z/s.test(stat)) return false; // exited, not yet reaped
    const argv = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0');
    if (argv.at(-1) === '') argv.pop();
    const tail = argv.slice(argv.length - child.args.length);
    if (argv.length <= child.args.length || tail.some((a, i) => a !== child.args[i])) return false;
    return readlinkSync(`/proc/${child.pid}/cwd`) === realpathSync(root);
  } catch {
    return false; // no such process, or not ours to read
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // exited meanwhile
  }
}

/**
 * Stops the children a previous `npm start` of `root` left running (SIGTERM, then SIGKILL after
 * `graceMs`), each named through `log`; the record is removed. Resolves with those stopped.
 */
export async function stopLeftoverChildren(
  root: string,
  options: { log: (line: string) => void; graceMs?: number },
): Promise<RecordedChild[]> {
  const left = readRecord(root).filter((c) => isRecordedChild(root, c));
  for (const c of left) {
    options.log(`stopping ${c.args.join(' ')} (pid ${c.pid}), left running by an earlier start that did not stop`);
    signal(c.pid, 'SIGTERM');
  }
  const until = Date.now() + (options.graceMs ?? 10_000);
  while (left.some((c) => isRecordedChild(root, c)) && Date.now() < until) await sleep(100);
  for (const c of left)
    if (isRecordedChild(root, c)) {
      options.log(`pid ${c.pid} did not stop in time: killing it`);
      signal(c.pid, 'SIGKILL');
    }
  for (let n = 0; n < 100 && left.some((c) => isRecordedChild(root, c)); n++) await sleep(50);
  writeChildRecord(root, []);
  return left;
}

// The admin CLI for ops teams: `npm run cli -- <command> [options]`. `--json` prints one JSON
// object. Exit codes: 0 success, 1 failure, 2 usage error.
import { parseArgs } from 'node:util';
import { loadDevEnv } from '@sts/common';
import { createDbClient, type Db } from '@sts/db';
import { CliUsageError, databaseUrl, type CliContext, type Command } from './command';
import { allCommands } from './commands';

export interface RunOutput {
  code: number;
  stdout: string;
  stderr: string;
}

function usage(commands: Command[]): string {
  const width = Math.max(...commands.map((c) => c.name.length));
  return [
    'usage: npm run cli -- <command> [options] [--json]',
    '',
    'commands:',
    ...commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
  ].join('\n');
}

/** Runs one CLI invocation; used by the bin and by tests (with their own environment). */
export async function runCli(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  commands: Command[] = allCommands,
  extras: Pick<CliContext, 'resolveHost'> = {},
): Promise<RunOutput> {
  const sorted = [...commands].sort((a, b) => b.name.split(' ').length - a.name.split(' ').length);
  const command = sorted.find((c) => {
    const words = c.name.split(' ');
    return words.every((w, i) => argv[i] === w);
  });
  if (!command && (argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help')) {
    return { code: 0, stdout: `${usage(commands)}\n`, stderr: '' };
  }
  if (!command) {
    const asked = argv
      .filter((a) => !a.startsWith('-'))
      .slice(0, 2)
      .join(' ');
    return { code: 2, stdout: '', stderr: `${asked ? `unknown command "${asked}"\n\n` : ''}${usage(commands)}\n` };
  }
  const words = argv.slice(command.name.split(' ').length);
  const rest =
    command.positional && words[0] !== undefined && !words[0].startsWith('-')
      ? [`--${command.positional}`, ...words]
      : words;
  const closers: (() => Promise<void>)[] = [];
  let db: Db | undefined;
  const ctx: CliContext = {
    env,
    db: () => {
      if (!db) {
        db = createDbClient({ url: databaseUrl(env), poolSize: 2 });
        const client = db;
        closers.push(() => client.$disconnect());
      }
      return db;
    },
    onClose: (fn) => closers.push(fn),
    ...extras,
  };
  let json = false;
  try {
    const { values } = parseArgs({
      args: rest,
      options: { ...command.options, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
      strict: true,
      allowPositionals: false,
    });
    json = values.json === true;
    if (values.help) return { code: 0, stdout: `${command.usage}\n`, stderr: '' };
    const result = await command.run(ctx, values);
    return { code: 0, stdout: json ? `${JSON.stringify(result.json)}\n` : `${result.text}\n`, stderr: '' };
  } catch (err) {
    const isUsage = err instanceof CliUsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
    const message = err instanceof Error ? err.message : String(err);
    const stderr = isUsage ? `${message}\n\n${command.usage}\n` : `error: ${message}\n`;
    return { code: isUsage ? 2 : 1, stdout: json ? `${JSON.stringify({ error: message })}\n` : '', stderr };
  } finally {
    for (const close of closers.reverse()) await close().catch(() => undefined);
  }
}

if (require.main === module) {
  // next to `npm start`: its generated settings (.tmp/dev.env) where the environment sets none
  loadDevEnv();
  runCli(process.argv.slice(2))
    .then((r) => {
      process.stdout.write(r.stdout);
      process.stderr.write(r.stderr);
      process.exitCode = r.code;
    })
    .catch((err: unknown) => {
      console.error(err);
      process.exitCode = 1;
    });
}

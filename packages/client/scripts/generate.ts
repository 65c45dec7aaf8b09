/**
 * Writes src/schema.ts, the client's types, with openapi-typescript from the OpenAPI document the
 * gateway serves at GET /api/v1/openapi.json: by default the document object the gateway serves
 * (services/gateway/src/http/openapi.ts), or with `--from <url>` the one a running gateway answers.
 * The test (src/client.test.ts) regenerates from the served document and fails when the committed
 * file differs.
 *
 *   npx tsx packages/client/scripts/generate.ts            # from the source of the served document
 *   npx tsx packages/client/scripts/generate.ts --from http://127.0.0.1:3000/api/v1/openapi.json
 *   … --check                                  # exit 1 when src/schema.ts differs (writes nothing)
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
// the document object the gateway serves (a build-time read of the service's source, not a runtime import)
import { openApiDocument } from '../../../services/gateway/src/http/openapi';
import { schemaSource } from './schemaSource';

async function main(): Promise<void> {
  const at = process.argv.indexOf('--from');
  let doc: object;
  if (at !== -1) {
    const url = process.argv[at + 1];
    if (!url) throw new Error('--from needs the URL of the OpenAPI document');
    doc = (await (await fetch(url)).json()) as object;
  } else {
    doc = JSON.parse(JSON.stringify(openApiDocument)) as object;
  }
  const out = path.join(__dirname, '../src/schema.ts');
  const text = await schemaSource(doc);
  if (process.argv.includes('--check')) {
    if (readFileSync(out, 'utf8') === text) return void console.log('src/schema.ts matches the document');
    console.error('src/schema.ts differs from the document: run npx tsx packages/client/scripts/generate.ts');
    process.exit(1);
  }
  writeFileSync(out, text);
  console.log(`wrote ${path.relative(process.cwd(), out)}`);
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exit(1);
});

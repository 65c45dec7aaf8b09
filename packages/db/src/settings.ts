/**
 * The database's own defaults for every session opened on it, whatever pools the connection.
 *
 * The query timeout is a setting of the database (`ALTER DATABASE … SET statement_timeout`), not
 * a startup parameter of the client: PgBouncer in transaction mode refuses startup parameters it
 * does not track (`unsupported startup parameter: statement_timeout`), and a session `SET` would
 * stay on whichever server connection ran it. A database default reaches every server session
 * PgBouncer or anything else opens, direct or pooled. A role that does not own the database sets
 * it for itself in this database (`ALTER ROLE CURRENT_USER IN DATABASE …`, which any role may do).
 * A more specific setting an operator makes (`ALTER ROLE sts IN DATABASE sts SET …`) wins over
 * the database default.
 */
import { Client } from 'pg';

/** The query timeout of every session of the services' database. */
export const STATEMENT_TIMEOUT = '15s';

// A DO block takes no parameters: the value is a constant of this file, quoted by format().
const APPLY_SQL = `
DO $$
BEGIN
  EXECUTE format('ALTER DATABASE %I SET statement_timeout = %L', current_database(), '${STATEMENT_TIMEOUT}');
EXCEPTION WHEN insufficient_privilege THEN
  EXECUTE format('ALTER ROLE CURRENT_USER IN DATABASE %I SET statement_timeout = %L', current_database(), '${STATEMENT_TIMEOUT}');
END
$$`;

/** Sets the database defaults on `client`'s database (idempotent; applies to sessions opened afterwards). */
export async function applyDatabaseSettings(client: Client): Promise<void> {
  await client.query(APPLY_SQL);
}

/** applyDatabaseSettings on the database of `databaseUrl`, over a connection of its own. */
export async function applyDatabaseSettingsAt(databaseUrl: string): Promise<void> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await applyDatabaseSettings(client);
  } finally {
    await client.end();
  }
}

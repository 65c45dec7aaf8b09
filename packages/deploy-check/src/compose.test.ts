/**
 * The compose file's exposure: only the public services (gateway, dashboard) are published beyond
 * the host's loopback; developer tools (the mail sink, the RabbitMQ management UI, database
 * ports) are bound to 127.0.0.1; the development mail sink runs only under a profile that is off
 * by default; and each service gets only the secrets its env schema reads.
 */
import path from 'node:path';
import {
  composeValue,
  PUBLIC_SERVICES,
  publishedPorts,
  readCompose,
  readEnvFile,
  REPO_ROOT,
  serviceEnvSchemas,
  type ComposeService,
} from './deploy';

/** The secrets: every key of the k8s Secret template. */
const SECRET_KEYS = Object.keys(readEnvFile(path.join(REPO_ROOT, 'k8s/secret.example.env')));

/** Services compose starts by default (no profile named). */
const startsByDefault = (svc: ComposeService) => (svc.profiles ?? []).length === 0;

describe('compose exposure', () => {
  it('publishes nothing but the gateway and the dashboard beyond the host loopback', () => {
    const exposed: string[] = [];
    for (const [name, svc] of Object.entries(readCompose().services)) {
      if (PUBLIC_SERVICES.has(name)) continue;
      for (const p of publishedPorts(svc)) if (!p.loopbackOnly) exposed.push(`${name}: ${p.spec}`);
    }
    expect(exposed).toEqual([]);
  });

  it('reads port specs the way compose does', () => {
    const ports = (...ports: string[]) => publishedPorts({ ports }).map((p) => p.loopbackOnly);
    expect(ports('8025:8025', '8025', '0.0.0.0:8025:8025', '[::]:8025:8025/tcp')).toEqual([false, false, false, false]);
    expect(ports('127.0.0.1:8025:8025', '[::1]:8025:8025')).toEqual([true, true]);
    expect(publishedPorts({ ports: [{ target: 8025, published: 8025 }] })[0]!.loopbackOnly).toBe(false);
    expect(publishedPorts({ ports: [{ target: 8025, host_ip: '127.0.0.1' }] })[0]!.loopbackOnly).toBe(true);
  });

  it('runs the development mail sink only under a profile, and no default service depends on it or sends to it', () => {
    const services = readCompose().services;
    const sinks = Object.entries(services).filter(([, s]) => /mailpit|mailhog|maildev/i.test(String(s.image ?? '')));
    expect(sinks.map(([n]) => n)).toEqual(['mailpit']);
    for (const [name, sink] of sinks) {
      expect({ name, profiles: sink.profiles ?? [] }).toEqual({ name, profiles: ['dev-mail'] });
      for (const [other, svc] of Object.entries(services)) {
        if (!startsByDefault(svc)) continue;
        expect({ other, dependsOnSink: name in (svc.depends_on ?? {}) }).toEqual({ other, dependsOnSink: false });
        const smtp = composeValue(svc.environment?.SMTP_URL ?? '');
        expect({ other, smtp: smtp.includes(name) }).toEqual({ other, smtp: false });
      }
    }
  });

  it('gives each service only the secrets its env schema reads', async () => {
    const compose = readCompose().services;
    const extra: string[] = [];
    for (const svc of await serviceEnvSchemas()) {
      const env = compose[svc.name]?.environment ?? {};
      for (const key of SECRET_KEYS) if (key in env && !(key in svc.schema.shape)) extra.push(`${svc.name}: ${key}`);
    }
    expect(extra).toEqual([]);
    // and the migration job gets the database URLs only (its advisory lock needs the direct one)
    expect(Object.keys(compose.migrate?.environment ?? {}).filter((k) => SECRET_KEYS.includes(k))).toEqual([
      'DATABASE_URL',
      'DATABASE_DIRECT_URL',
    ]);
  });
});

import {
  checkWebhookUrlForSave,
  createHostAllowList,
  WebhookConfigError,
  webhookSavePolicyFromEnv,
  WebhookUrlError,
  type HostResolver,
  type WebhookSavePolicy,
} from './index';

/** A local resolver (no network): names map to fixed addresses; unknown names fail like ENOTFOUND. */
function resolver(table: Record<string, string[]>): HostResolver {
  return (host) => {
    const found = table[host];
    if (found) return Promise.resolve(found);
    return Promise.reject(Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' }));
  };
}

const DNS = resolver({
  'example.com': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
  'discord.com': ['162.159.128.233'],
  'internal.example': ['10.1.2.3', 'fd00::5'],
  'loop.example': ['127.0.0.1', '::1'],
  'mapped.example': ['::ffff:192.168.1.1'],
  'mixed.example': ['93.184.215.14', '10.0.0.1'],
  'empty.example': [],
  localhost: ['127.0.0.1'],
});

const policy = (over: Partial<WebhookSavePolicy> = {}): WebhookSavePolicy => ({
  allowedPorts: [],
  allowPrivateHosts: [],
  resolve: DNS,
  ...over,
});

async function refusal(url: string, p = policy()): Promise<WebhookUrlError> {
  try {
    await checkWebhookUrlForSave(url, p);
  } catch (err) {
    if (err instanceof WebhookUrlError) return err;
    throw err;
  }
  throw new Error(`${url} was accepted`);
}

describe('checkWebhookUrlForSave', () => {
  it('accepts a public HTTPS URL with its kind and no warnings', async () => {
    await expect(checkWebhookUrlForSave('https://example.com/hook', policy())).resolves.toEqual({
      url: 'https://example.com/hook',
      kind: 'native',
      warnings: [],
    });
    await expect(checkWebhookUrlForSave('https://discord.com/api/webhooks/1/t', policy())).resolves.toMatchObject({
      kind: 'discord',
    });
    await expect(checkWebhookUrlForSave('https://93.184.215.14/x', policy())).resolves.toMatchObject({ warnings: [] });
  });

  it('refuses non-HTTPS and credentials', async () => {
    expect(await refusal('http://example.com/')).toMatchObject({ problem: 'not_https' });
    expect((await refusal('http://example.com/')).message).toMatch(/must use https \(got http\)/);
    expect(await refusal('https://u:p@example.com/')).toMatchObject({ problem: 'credentials' });
  });

  // every IPv4 spelling the WHATWG URL parser turns into an address, and the IPv6 forms the dial-time guard refuses
  it.each([
    ['https://127.0.0.1/', /127\.0\.0\.1 is not a public address \(loopback\)/],
    ['https://2130706433/', /127\.0\.0\.1 .*loopback/],
    ['https://0x7f000001/', /127\.0\.0\.1 .*loopback/],
    ['https://017700000001/', /127\.0\.0\.1 .*loopback/],
    ['https://0x7f.1/', /127\.0\.0\.1 .*loopback/],
    ['https://127.1/', /127\.0\.0\.1 .*loopback/],
    ['https://0/', /0\.0\.0\.0 .*unspecified/],
    ['https://10.0.0.1/', /private/],
    ['https://0xa.0.0.1/', /10\.0\.0\.1 .*private/],
    ['https://172.16.5.4/', /private/],
    ['https://192.168.1.1/', /private/],
    ['https://100.64.0.1/', /carrier-grade NAT/],
    ['https://169.254.169.254/latest/meta-data', /link-local/],
    ['https://224.0.0.1/', /multicast/],
    ['https://255.255.255.255/', /broadcast/],
    ['https://240.0.0.1/', /reserved/],
    ['https://198.18.0.1/', /benchmarking/],
    ['https://192.0.2.1/', /documentation/],
    ['https://[::1]/', /::1 is not a public address \(loopback\)/],
    ['https://[::]/', /unspecified/],
    ['https://[::ffff:127.0.0.1]/', /embeds 127\.0\.0\.1.*loopback/],
    ['https://[::ffff:7f00:1]/', /embeds 127\.0\.0\.1/],
    ['https://[::ffff:0:10.0.0.1]/', /embeds 10\.0\.0\.1/],
    ['https://[::10.0.0.1]/', /embeds 10\.0\.0\.1/],
    ['https://[64:ff9b::192.168.0.1]/', /embeds 192\.168\.0\.1/],
    ['https://[64:ff9b:1::1]/', /local-use NAT64/],
    ['https://[2002:a9fe:a9fe::1]/', /embeds 169\.254\.169\.254/],
    ['https://[fd12:3456::1]/', /unique-local/],
    ['https://[fe80::1]/', /link-local/],
    ['https://[fec0::1]/', /site-local/],
    ['https://[ff02::1]/', /multicast/],
    ['https://[2001:db8::1]/', /documentation/],
    ['https://[2001::1]/', /IETF protocol assignments/],
    ['https://[100::1]/', /discard-only/],
  ])('refuses the IP literal %s', async (url, message) => {
    const err = await refusal(url);
    expect(err.problem).toBe('private_address');
    expect(err.message).toMatch(/^webhook URL host /);
    expect(err.message).toMatch(message);
  });

  it('accepts public IP literals, including IPv6 and public embedded IPv4', async () => {
    for (const url of ['https://8.8.8.8/', 'https://[2606:4700::1111]/', 'https://[::ffff:8.8.8.8]/']) {
      await expect(checkWebhookUrlForSave(url, policy())).resolves.toMatchObject({ warnings: [] });
    }
  });

  it('refuses ports other than 443 unless WEBHOOK_ALLOWED_PORTS lists them', async () => {
    const err = await refusal('https://example.com:8443/x');
    expect(err.problem).toBe('port_not_allowed');
    expect(err.message).toMatch(/port 8443 is not allowed: only 443 \(WEBHOOK_ALLOWED_PORTS/);
    expect((await refusal('https://example.com:80/', policy({ allowedPorts: [8443] }))).message).toMatch(
      /port 80 is not allowed: only 443, 8443/,
    );
    await expect(
      checkWebhookUrlForSave('https://example.com:8443/x', policy({ allowedPorts: [8443] })),
    ).resolves.toMatchObject({ url: 'https://example.com:8443/x' });
    // an explicit :443 is the default port
    await expect(checkWebhookUrlForSave('https://example.com:443/x', policy())).resolves.toMatchObject({
      url: 'https://example.com/x',
    });
  });

  it('refuses a name that resolves only to non-public addresses, naming them only in the detail for the log', async () => {
    for (const [host, addr] of [
      ['internal.example', /10\.1\.2\.3 .*private.*fd00::5 .*unique-local/],
      ['loop.example', /127\.0\.0\.1 .*loopback/],
      ['mapped.example', /embeds 192\.168\.1\.1/],
      ['localhost', /127\.0\.0\.1/],
    ] as const) {
      const err = await refusal(`https://${host}/hook`);
      expect(err.problem).toBe('resolves_to_private_address');
      expect(err.message).toMatch(new RegExp(`host ${host.replace('.', '\\.')} resolves only to non-public addresses`));
      // the customer's message is generic, the addresses are for the server's log
      expect(err.message).not.toMatch(addr);
      expect(err.message).not.toMatch(/\d+\.\d+\.\d+\.\d+|::/);
      expect(err.detail).toMatch(addr);
    }
    // trailing dot and upper case are the same name
    expect((await refusal('https://LOOP.example./')).problem).toBe('resolves_to_private_address');
  });

  it('warns (and accepts) when the name cannot be resolved, has no address, or is partly non-public', async () => {
    const unknown = await checkWebhookUrlForSave('https://nowhere.example/h', policy());
    expect(unknown.warnings).toEqual([expect.stringMatching(/could not resolve nowhere\.example \(ENOTFOUND\)/)]);
    const empty = await checkWebhookUrlForSave('https://empty.example/h', policy());
    expect(empty.warnings).toEqual([expect.stringMatching(/has no addresses/)]);
    const mixed = await checkWebhookUrlForSave('https://mixed.example/h', policy());
    expect(mixed.warnings).toEqual([expect.stringMatching(/also resolves to non-public addresses; deliveries/)]);
    expect(mixed.warnings.join()).not.toContain('10.0.0.1');
    const slow: HostResolver = () => new Promise(() => undefined);
    const timedOut = await checkWebhookUrlForSave(
      'https://slow.example/',
      policy({ resolve: slow, resolveTimeoutMs: 50 }),
    );
    expect(timedOut.warnings).toEqual([
      expect.stringMatching(/could not resolve slow\.example \(no answer within 50 ms\)/),
    ]);
  });

  it('WEBHOOK_ALLOW_PRIVATE_HOSTS exempts names from the resolution check, never IP literals', async () => {
    const p = policy({ allowPrivateHosts: ['localhost', 'Internal.Example.'] });
    await expect(checkWebhookUrlForSave('https://localhost/h', p)).resolves.toMatchObject({ warnings: [] });
    await expect(checkWebhookUrlForSave('https://internal.example/h', p)).resolves.toMatchObject({ warnings: [] });
    expect((await refusal('https://127.0.0.1/', p)).problem).toBe('private_address');
    // the name is exempt from the address check, not from the port rule
    expect((await refusal('https://localhost:3000/', p)).problem).toBe('port_not_allowed');
    await expect(
      checkWebhookUrlForSave('https://localhost:3000/', { ...p, allowedPorts: [3000] }),
    ).resolves.toMatchObject({ url: 'https://localhost:3000/' });
  });
});

describe('save policy from the environment', () => {
  it('parses WEBHOOK_ALLOWED_PORTS and WEBHOOK_ALLOW_PRIVATE_HOSTS', () => {
    const p = webhookSavePolicyFromEnv({
      WEBHOOK_ALLOWED_PORTS: '8443, 9443',
      WEBHOOK_ALLOW_PRIVATE_HOSTS: 'localhost',
    });
    expect(p.allowedPorts).toEqual([8443, 9443]);
    expect(p.allowPrivateHosts).toEqual(['localhost']);
    expect(webhookSavePolicyFromEnv({}).allowedPorts).toEqual([]);
  });

  it.each(['0', '65536', 'http', '-1', '443x'])('refuses the port %j with an error naming the variable', (port) => {
    expect(() => webhookSavePolicyFromEnv({ WEBHOOK_ALLOWED_PORTS: port })).toThrow(
      /WEBHOOK_ALLOWED_PORTS must be a comma list of ports 1-65535/,
    );
  });

  it.each(['127.0.0.1', '::1', '[::1]', '10.0.0.0/8', '2130706433', '0x7f.1'])(
    'WEBHOOK_ALLOW_PRIVATE_HOSTS takes names only: %j is a config error',
    (entry) => {
      expect(() => webhookSavePolicyFromEnv({ WEBHOOK_ALLOW_PRIVATE_HOSTS: `localhost,${entry}` })).toThrow(
        WebhookConfigError,
      );
      expect(() => createHostAllowList([entry])).toThrow(/WEBHOOK_ALLOW_PRIVATE_HOSTS takes host names only/);
    },
  );
});

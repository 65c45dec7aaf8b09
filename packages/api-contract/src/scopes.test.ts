import { managementWrites, needsManageScope } from './scopes';

describe('which calls need a manage key', () => {
  it('every management write and the delivery log; no read endpoint', () => {
    const id = '0b9c7d4e-0000-4000-8000-000000000000';
    const manage: [string, string][] = [
      ['POST', '/api/v1/monitors'],
      ['POST', '/api/v1/monitors/'],
      ['POST', '/api/v1/monitors/preview'],
      ['PATCH', `/api/v1/monitors/${id}`],
      ['DELETE', `/api/v1/monitors/${id}`],
      ['POST', `/api/v1/monitors/${id}/pause`],
      ['POST', `/api/v1/monitors/${id}/resume`],
      ['POST', `/api/v1/monitors/${id}/recover`],
      ['PUT', `/api/v1/monitors/${id}/webhook`],
      ['PATCH', `/api/v1/monitors/${id}/webhook`],
      ['GET', `/api/v1/monitors/${id}/webhook`],
      ['DELETE', `/api/v1/monitors/${id}/webhook`],
      ['POST', `/api/v1/monitors/${id}/webhook/test`],
      ['POST', `/api/v1/monitors/${id}/webhook/rotate`],
      ['POST', `/api/v1/monitors/${id}/webhook/enable`],
      ['GET', `/api/v1/monitors/${id}/deliveries`],
      ['HEAD', `/api/v1/monitors/${id}/deliveries`],
      ['POST', `/api/v1/deliveries/${id}/redeliver`],
    ];
    for (const [method, path] of manage)
      expect([method, path, needsManageScope(method, path)]).toEqual([method, path, true]);
    const read: [string, string][] = [
      ['GET', '/api/v1/monitors'],
      ['GET', `/api/v1/monitors/${id}`],
      ['GET', `/api/v1/monitors/${id}/hits`],
      ['GET', '/api/v1/users/alice'],
      ['POST', '/api/v1/tweets'],
      ['DELETE', '/api/v1/monitors'],
      ['POST', `/api/v1/monitors/${id}/hits`],
      ['POST', '/api/v1/monitorsx'],
      ['OPTIONS', `/api/v1/monitors/${id}/deliveries`],
    ];
    for (const [method, path] of read)
      expect([method, path, needsManageScope(method, path)]).toEqual([method, path, false]);
  });

  it('names the writes a path takes (the gateway passes only these on; the rest is its 405 with Allow)', () => {
    expect(managementWrites('/api/v1/monitors')).toEqual(['POST']);
    expect(managementWrites('/api/v1/monitors/abc').sort()).toEqual(['DELETE', 'PATCH']);
    expect(managementWrites('/api/v1/monitors/abc/webhook').sort()).toEqual(['DELETE', 'PATCH', 'PUT']);
    expect(managementWrites('/api/v1/monitors/abc/hits')).toEqual([]);
    expect(managementWrites('/api/v1/users/abc')).toEqual([]);
  });
});

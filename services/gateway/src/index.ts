export { createGateway, type Gateway, type GatewayOptions } from './app';
export { createKeyStore, type KeyStore } from './adapters/keys';
export { createQuotaStore, type QuotaStore } from './adapters/leasedQuota';
export { loadGatewayEnv, gatewayEnvSchema, type GatewayEnv } from './env';
export { openApiDocument } from './http/openapi';

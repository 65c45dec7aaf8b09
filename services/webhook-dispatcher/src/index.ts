export {
  createDispatcher,
  DISPATCHER_BINDINGS,
  DISPATCHER_QUEUE,
  type Dispatcher,
  type DispatcherOptions,
} from './app';
export { createPrismaRepository, type DispatcherRepository } from './adapters/repository';
export { createHttpsSender, type HttpsSender, type HttpsSenderOptions, type SendResult } from './adapters/httpsSender';
export { blockedReason } from './domain/addressPolicy';
export { buildBody, discordBody, nativeBody, slackBody, type HitPayload, type TestPayload } from './domain/payloads';
export { dispatcherEnvSchema, parseDispatcherEnv, type DispatcherEnv } from './env';

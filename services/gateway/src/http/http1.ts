/**
 * The gateway's settings of @sts/http1's server: what it refuses is answered in the API's error
 * format (`{ error, code, request_id }`, JSON), and a client's X-Request-Id is kept when it is
 * acceptable (domain/limits.ts), else a new UUID is made.
 */
import { randomUUID } from 'node:crypto';
import {
  createHttpServer as createHttp1Server,
  type HttpServer,
  type HttpServerOptions,
  type ServerError,
} from '@sts/http1';
import { acceptRequestId } from '../domain/limits';

export type { HttpRequest, HttpResponder, HttpServer } from '@sts/http1';

const JSON_TYPE = 'application/json; charset=utf-8';

function apiErrorBody(e: ServerError): { contentType: string; body: string } {
  return { contentType: JSON_TYPE, body: JSON.stringify({ error: e.message, code: e.code, request_id: e.requestId }) };
}

function gatewayRequestId(clientValue: string | undefined): string {
  return acceptRequestId(clientValue) ?? randomUUID();
}

export function createHttpServer(options: Omit<HttpServerOptions, 'errorBody' | 'requestId'>): HttpServer {
  return createHttp1Server({ ...options, errorBody: apiErrorBody, requestId: gatewayRequestId });
}

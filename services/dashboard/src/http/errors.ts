import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import type { Logger } from '@sts/common';
import { httpStatusOf, NotFoundError, RateLimitedError, UseCaseError } from '@sts/usecases';
import { ThrottledError } from '../adapters/throttle';
import { errorPage } from '../views/auth';
import { pageContext, CsrfError } from './session';
import { errorMessage } from '@sts/core';

interface Shown {
  status: number;
  title: string;
  message: string;
}

/** Named errors → status and a page a person can act on; anything else is a 500 without details. */
function describe(err: unknown): Shown {
  if (err instanceof CsrfError) return { status: 403, title: 'Form expired', message: err.message };
  if (err instanceof ThrottledError) return { status: 429, title: 'Too many attempts', message: err.message };
  if (err instanceof RateLimitedError)
    return {
      status: 429,
      title: 'Slow down',
      message: `Test webhook and Redeliver are limited per account. ${capitalise(err.message)}.`,
    };
  if (err instanceof NotFoundError)
    return { status: 404, title: 'Not found', message: 'There is nothing here, or it belongs to another account.' };
  if (err instanceof UseCaseError) {
    const status = httpStatusOf(err);
    return { status, title: status === 503 ? 'Temporarily unavailable' : 'That did not work', message: err.message };
  }
  const status =
    (err as { status?: unknown; statusCode?: unknown })?.status ?? (err as { statusCode?: unknown })?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    const message = status === 413 ? 'The form was too large.' : 'The request could not be read.';
    return { status, title: 'Bad request', message };
  }
  return {
    status: 500,
    title: 'Something went wrong',
    message: 'Something went wrong on our side. Please try again in a moment.',
  };
}

function capitalise(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

function safeContext(req: Request) {
  try {
    return pageContext(req);
  } catch {
    return { csrf: '', path: req.path };
  }
}

export function errorMiddleware(logger: Logger): ErrorRequestHandler {
  return (err: unknown, req, res: Response, _next) => {
    const shown = describe(err);
    if (shown.status >= 500) {
      logger.error('request failed', {
        method: req.method,
        path: req.path,
        err: errorMessage(err),
        name: err instanceof Error ? err.name : undefined,
      });
    }
    if (res.headersSent) return void res.end();
    if (err instanceof ThrottledError || err instanceof RateLimitedError)
      res.set('Retry-After', String(err.retryAfterSec));
    // no session (Redis down, or the session middleware failed): a page without the account bits
    const ctx = req.session ? safeContext(req) : { csrf: '', path: req.path };
    res
      .status(shown.status)
      .type('html')
      .send(errorPage(ctx, shown.status, shown.title, shown.message));
  };
}

export const notFound: RequestHandler = (req, res) => {
  const ctx = req.session ? safeContext(req) : { csrf: '', path: req.path };
  res
    .status(404)
    .type('html')
    .send(errorPage(ctx, 404, 'Not found', 'There is no page at this address.'));
};

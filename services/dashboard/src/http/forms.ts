import type { Request } from 'express';
import { ConflictError, PlanLimitError, ValidationError } from '@sts/usecases';
import type { FieldErrors } from '../views/forms';

/** A form field as a string ('' when absent or not a single string). */
export function str(req: Request, name: string): string {
  const v = (req.body as Record<string, unknown> | undefined)?.[name];
  return typeof v === 'string' ? v : '';
}

/** A repeated form field (checkboxes of one name) as its string values ([] when absent). */
export function strings(req: Request, name: string): string[] {
  const v = (req.body as Record<string, unknown> | undefined)?.[name];
  const all: unknown[] = Array.isArray(v) ? v : [v];
  return all.filter((x): x is string => typeof x === 'string');
}

/** Query parameter as a string, or undefined. */
export function query(req: Request, name: string): string | undefined {
  const v = (req.query as Record<string, unknown>)[name];
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/**
 * The use-case errors a form shows next to its fields (or above the form); null for any other
 * error, which the caller re-throws to the error middleware (404, 503, 500 pages).
 */
export function formErrors(err: unknown, fields: readonly string[]): FieldErrors | null {
  if (err instanceof ValidationError || err instanceof ConflictError || err instanceof PlanLimitError) {
    const field = err.field && fields.includes(err.field) ? err.field : '_form';
    const message =
      field === '_form' && err.field && err instanceof ValidationError ? `${err.field}: ${err.message}` : err.message;
    return { [field]: sentence(message) };
  }
  return null;
}

function sentence(s: string): string {
  return s.length ? s[0]!.toUpperCase() + s.slice(1) : s;
}

/** "" → undefined; otherwise a whole number or a ValidationError naming the field. */
export function optionalInt(value: string, field: string): number | undefined {
  const v = value.trim();
  if (v === '') return undefined;
  if (!/^\d{1,9}$/.test(v)) throw new ValidationError(field, 'must be a whole number of seconds');
  return Number(v);
}

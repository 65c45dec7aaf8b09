/** The message of anything thrown (an Error's message, else its string form): what logs carry as `err`. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * The X Activity API intake's variables (SOCIAL_SOURCE=x), spread into the poller's environment
 * schema. A bad value stops the poller with exit code 2, naming the variable.
 */
import { z } from 'zod';

export const activityEnv = {
  /**
   * what the X Activity API carries: `off` (nothing: today's paths), `profiles` (profile changes
   * and deleted posts; posts as today), `all` (also `post.create` for username monitors)
   */
  X_INTAKE_ACTIVITY: z.enum(['off', 'profiles', 'all']).default('profiles'),
  /** most XAA subscriptions (one event type for one account) the app may hold: X Pro 2,500, Enterprise 20,000 */
  X_ACTIVITY_MAX_SUBS: z.coerce.number().int().min(0).max(100_000).default(2500),
  /** the account lookup's interval for accounts whose profile changes XAA pushes (health only) */
  X_HEALTH_LOOKUP_SECONDS: z.coerce.number().int().min(1).max(86_400).default(3600),
};

/**
 * X request metrics, one home for their names (poller and read-api register them):
 *   x_requests_total{family,status}      every X call by endpoint family and HTTP status
 *                                        (`timeout` / `network` when none came back)
 *   x_requests_refused_total{family,priority}  calls the governor refused (never sent)
 *   x_budget_remaining{family}           the fleet's remaining requests in the family's window
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import { X_FAMILIES, type XFamily, type XGovernor, type XPriority } from './governor';

export interface XMetrics {
  request(family: XFamily, status: string): void;
  refused(family: XFamily, priority: XPriority): void;
}

export const noXMetrics: XMetrics = { request: () => undefined, refused: () => undefined };

/** Registers the X metrics on `registry`; the budget gauge reads the governor at each scrape. */
export function createXMetrics(registry: Registry, governor: XGovernor): XMetrics {
  const requests = new Counter({
    name: 'x_requests_total',
    help: 'X API requests by endpoint family and HTTP status (timeout/network: no answer)',
    labelNames: ['family', 'status'],
    registers: [registry],
  });
  const refused = new Counter({
    name: 'x_requests_refused_total',
    help: 'X API calls the rate-limit governor refused (not sent) by family and priority',
    labelNames: ['family', 'priority'],
    registers: [registry],
  });
  new Gauge({
    name: 'x_budget_remaining',
    help: "requests left in the fleet's current X rate-limit window, by endpoint family",
    labelNames: ['family'],
    registers: [registry],
    async collect() {
      for (const family of X_FAMILIES) {
        try {
          this.set({ family }, (await governor.budget(family)).remaining);
        } catch {
          // Redis unavailable: keep the last value
        }
      }
    },
  });
  return {
    request: (family, status) => requests.inc({ family, status }),
    refused: (family, priority) => refused.inc({ family, priority }),
  };
}

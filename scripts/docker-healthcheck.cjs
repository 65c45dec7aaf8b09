// Docker HEALTHCHECK of the image: GET /healthz (or the path given as the first argument, e.g.
// /readyz) on the ops port of the service this container
// runs. The service is read from PID 1's command line (tini -- /app/docker-entrypoint.sh <service>),
// the port from OPS_PORT or the service's default ops port. Exit 0 healthy, 1 not; commands that
// are not long-running services (migrate, cli, demo) are always healthy.
'use strict';
const { readFileSync } = require('node:fs');

/** default OPS_PORT of each service (keep in step with each service's env.ts; OPS_PORT overrides) */
const OPS_PORTS = { gateway: 3100, dashboard: 3101, 'read-api': 3102, poller: 3003, 'webhook-dispatcher': 3004 };

function service() {
  try {
    const args = readFileSync('/proc/1/cmdline', 'utf8').split('\0');
    return args.find((a) => Object.prototype.hasOwnProperty.call(OPS_PORTS, a));
  } catch {
    return undefined;
  }
}

// `docker-healthcheck.cjs [path] [service]`: compose names the service; the image's HEALTHCHECK
// (one image for every service) finds it from PID 1's command line
const name = process.argv[3] || service();
if (!name) process.exit(0);
const port = Number(process.env.OPS_PORT || OPS_PORTS[name]);
const probePath = process.argv[2] || '/healthz';
fetch(`http://127.0.0.1:${port}${probePath}`, { signal: AbortSignal.timeout(2500) }).then(
  (res) => process.exit(res.ok ? 0 : 1),
  () => process.exit(1),
);

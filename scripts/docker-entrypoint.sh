#!/bin/sh
# Container entry point: `<service>` runs that service, `migrate` applies the migrations,
# `cli ...` runs the admin CLI.
set -e
cd /app
case "$1" in
  migrate) exec node --import tsx packages/db/src/cli.ts deploy ;;
  cli) shift; exec node --import tsx packages/admin-cli/src/main.ts "$@" ;;
  demo) exec node --import tsx packages/admin-cli/src/main.ts demo run ;;
  gateway|read-api|poller|webhook-dispatcher|dashboard) exec node --import tsx "services/$1/src/main.ts" ;;
  *) echo "unknown command: $1 (expected a service name, migrate or cli)" >&2; exit 2 ;;
esac

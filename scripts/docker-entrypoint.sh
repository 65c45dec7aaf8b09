#!/bin/sh
# Container entry point (PID 1 is tini, which runs this script): `<service>` runs that service's
# bundle, `migrate` applies the migrations (under Prisma's advisory lock), `cli ...` runs the
# admin CLI, `demo` the demo tweet generator. The bundles are built by scripts/build.mjs.
set -e
cd /app
case "$1" in
  migrate) exec node --enable-source-maps dist/bin/migrate.js deploy ;;
  cli) shift; exec node --enable-source-maps dist/bin/cli.js "$@" ;;
  # the demo generator: its own bundle where it has one, else the CLI's `demo run`
  demo) if [ -f dist/bin/demo.js ]; then exec node --enable-source-maps dist/bin/demo.js; else exec node --enable-source-maps dist/bin/cli.js demo run; fi ;;
  gateway|read-api|poller|webhook-dispatcher|dashboard) exec node --enable-source-maps "dist/bin/$1.js" ;;
  *) echo "unknown command: $1 (expected a service name, migrate, cli or demo)" >&2; exit 2 ;;
esac

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
  # the dispatcher collects garbage on its main thread: on the one or two cores a replica gets, V8's
  # parallel helper threads only compete with it for them (docs/benchmarks.md, "GC threads")
  webhook-dispatcher) exec node --enable-source-maps --single-threaded-gc dist/bin/webhook-dispatcher.js ;;
  gateway|read-api|poller|dashboard) exec node --enable-source-maps "dist/bin/$1.js" ;;
  *) echo "unknown command: $1 (expected a service name, migrate, cli or demo)" >&2; exit 2 ;;
esac

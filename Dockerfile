# syntax=docker/dockerfile:1
# One image for every service; the command picks which one runs (gateway, read-api, poller,
# webhook-dispatcher, dashboard), or `migrate`, `cli ...` or `demo`. See scripts/docker-entrypoint.sh
# and k8s/README.md ("The image").
#
# Build stage: installs the workspace (dev dependencies included), generates the Prisma client and
# bundles each entry with esbuild (scripts/build.mjs). Run stage: the Node base, tini, and the
# bundles only: they contain their production dependencies, so the image has no node_modules,
# no tsx and no TypeScript at run time.
#
# The base is pinned to an exact Node LTS release on Debian bookworm-slim; pin the digest as well
# in your registry mirror (`FROM node:22.21.1-bookworm-slim@sha256:...`) if your policy asks for it.
ARG NODE_IMAGE=node:22.21.1-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
ENV CI=true
# Manifests first, so the dependency layer is cached until they change. Every workspace
# package.json must be listed here (packages/deploy-check checks it).
COPY package.json pnpm-lock.yaml pnpm-workspace.yaml ./
COPY packages/admin-cli/package.json packages/admin-cli/
COPY packages/api-contract/package.json packages/api-contract/
COPY packages/client/package.json packages/client/
COPY packages/common/package.json packages/common/
COPY packages/core/package.json packages/core/
COPY packages/db/package.json packages/db/
COPY packages/deploy-check/package.json packages/deploy-check/
COPY packages/http1/package.json packages/http1/
COPY packages/mcp/package.json packages/mcp/
COPY packages/messaging/package.json packages/messaging/
COPY packages/signing/package.json packages/signing/
COPY packages/social/package.json packages/social/
COPY packages/telemetry/package.json packages/telemetry/
COPY packages/testing/package.json packages/testing/
COPY packages/usecases/package.json packages/usecases/
COPY packages/x-stream/package.json packages/x-stream/
COPY services/dashboard/package.json services/dashboard/
COPY services/gateway/package.json services/gateway/
COPY services/poller/package.json services/poller/
COPY services/read-api/package.json services/read-api/
COPY services/webhook-dispatcher/package.json services/webhook-dispatcher/
RUN npx -y pnpm@10.34.9 install --frozen-lockfile
COPY . .
# generates the Prisma client (no database needed), then bundles into /app/dist
RUN node scripts/setup.mjs && node scripts/build.mjs

FROM ${NODE_IMAGE}
# tini as PID 1: forwards SIGTERM to node and reaps zombies (the services also install their
# signal handlers first thing, so a stop works while they start).
RUN apt-get update \
  && apt-get install -y --no-install-recommends tini \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /app/dist /app/dist
COPY scripts/docker-entrypoint.sh scripts/docker-healthcheck.cjs /app/
# the `node` user of the base image (uid 1000); Kubernetes runs it with runAsNonRoot
USER 1000:1000
# The ops port of the service this container runs (OPS_PORT, or the service's default);
# compose and Kubernetes define their own checks, this one serves plain `docker run`.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 CMD ["node", "/app/docker-healthcheck.cjs"]
ENTRYPOINT ["/usr/bin/tini", "--", "/app/docker-entrypoint.sh"]
CMD ["gateway"]

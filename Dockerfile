# One image for every service; the command picks which one runs (gateway, read-api, poller,
# webhook-dispatcher, dashboard), or `migrate`, or `cli ...`. See scripts/docker-entrypoint.sh.
FROM node:20-bookworm-slim AS build
WORKDIR /app
ENV CI=true
# Manifests first, so the dependency layer is cached until they change.
COPY package.json pnpm-lock.yaml pnpm-workspace.yaml ./
COPY packages/db/package.json packages/db/
COPY packages/signing/package.json packages/signing/
COPY packages/common/package.json packages/common/
COPY packages/messaging/package.json packages/messaging/
COPY packages/core/package.json packages/core/
COPY packages/api-contract/package.json packages/api-contract/
COPY packages/social/package.json packages/social/
COPY packages/testing/package.json packages/testing/
COPY packages/admin-cli/package.json packages/admin-cli/
COPY packages/usecases/package.json packages/usecases/
COPY services/gateway/package.json services/gateway/
COPY services/read-api/package.json services/read-api/
COPY services/poller/package.json services/poller/
COPY services/webhook-dispatcher/package.json services/webhook-dispatcher/
COPY services/dashboard/package.json services/dashboard/
RUN npx -y pnpm@10.34.9 install --frozen-lockfile
COPY . .
# generates the Prisma client (no database needed)
RUN node scripts/setup.mjs

FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /app /app
USER node
ENTRYPOINT ["/app/scripts/docker-entrypoint.sh"]
CMD ["gateway"]

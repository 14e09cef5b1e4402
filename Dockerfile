# tollgate on Node 24, no build step (Node runs the TypeScript sources with type
# stripping). Runs as the image's non-root `node` user (uid 1000) and writes only to
# /var/cache/tollgate (Git clones) and /tmp, both emptyDir volumes in deploy/, so the
# root filesystem can be mounted read-only.
#
#   docker build -t tollgate:dev .
#   docker run --read-only --tmpfs /tmp -v tollgate-cache:/var/cache/tollgate tollgate:dev run --help
ARG NODE_IMAGE=node:24-slim

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# Production dependencies only; no install scripts run from third-party packages.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

FROM ${NODE_IMAGE}
ENV NODE_ENV=production \
    HOME=/tmp \
    TOLLGATE_GIT_CACHE_DIR=/var/cache/tollgate
WORKDIR /app
COPY --from=deps --chown=root:root /app/node_modules ./node_modules
COPY --chown=root:root package.json ./
COPY --chown=root:root bin ./bin
COPY --chown=root:root src ./src
COPY --chown=root:root schemas ./schemas
RUN mkdir -p /var/cache/tollgate && chown node:node /var/cache/tollgate
USER 1000:1000
EXPOSE 9090
ENTRYPOINT ["node", "/app/bin/tollgate.js"]
CMD ["run"]

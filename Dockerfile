# syntax=docker/dockerfile:1
# gatewayd on Node 24 LTS (see docs/operations.md "Running it as a service" for why not 26). Build: docker build -t gatewayd .
# Run:   docker run -p 8443:8443 -p 1883:1883 -p 8883:8883 -v gatewayd-data:/var/lib/gatewayd \
#          -v gatewayd-services:/etc/gatewayd/services gatewayd
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: npm ci's prepare script builds, and the sources are copied only below (the
# dependencies' layer stays cached while they change); the build runs after them.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.runtime.json ./
COPY config ./config
COPY src ./src
COPY scripts ./scripts
COPY ui ./ui
# What the image runs, not the tests (scripts/install.sh builds the same way).
RUN npm run build:runtime && npm prune --omit=dev --no-audit --no-fund

# Runtime: production dependencies and compiled code only, non-root, tini as PID 1 (it reaps the
# child processes that restores and openssl start, and forwards SIGTERM).
FROM node:24-bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends tini && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production \
    GATEWAYD_DATA_DIR=/var/lib/gatewayd \
    GATEWAYD_SET__MAPPING__SERVICESDIR=/etc/gatewayd/services
WORKDIR /opt/gatewayd
RUN groupadd --system gatewayd && useradd --system --gid gatewayd --home-dir /var/lib/gatewayd gatewayd \
 && mkdir -p /var/lib/gatewayd /etc/gatewayd/services \
 && chown gatewayd:gatewayd /var/lib/gatewayd /etc/gatewayd/services && chmod 0700 /var/lib/gatewayd
COPY --from=build /app/package.json /app/package-lock.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist/src ./dist/src
COPY --from=build /app/dist/ui ./dist/ui
COPY --from=build /app/config ./config
# The README and the pages its links point to: docs/ (.dockerignore leaves the screenshots out) and
# the changelog. From the context: the build stage does not copy them.
COPY README.md CHANGELOG.md ./
COPY docs/*.md ./docs/
USER gatewayd
VOLUME ["/var/lib/gatewayd", "/etc/gatewayd/services"]
# 8443: HTTPS (API, web UI, wss). 8080 serves in full only loopback clients (docs/https.md):
# from outside the container it answers /health and redirects to 8443.
EXPOSE 8443 8080 1883 8883
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.GATEWAYD_HTTP_PORT||8080)+'/health/ready').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["/usr/bin/tini", "--"]
# The same Node flags as npm start and the systemd unit (docs/footprint.md).
CMD ["node", "dist/src/main.js"]

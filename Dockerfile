# syntax=docker/dockerfile:1
# Build stage: full dependencies, TypeScript compile.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY config ./config
COPY src ./src
COPY test ./test
COPY scripts ./scripts
COPY ui ./ui
RUN npm run build && npm prune --omit=dev

# Runtime stage: production dependencies and compiled code only, non-root.
FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    GATEWAYD_DATA_DIR=/var/lib/gatewayd
WORKDIR /opt/gatewayd
RUN groupadd --system gatewayd && useradd --system --gid gatewayd --home-dir /var/lib/gatewayd gatewayd \
 && mkdir -p /var/lib/gatewayd && chown gatewayd:gatewayd /var/lib/gatewayd && chmod 0700 /var/lib/gatewayd
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist/src ./dist/src
COPY --from=build /app/dist/ui ./dist/ui
COPY --from=build /app/config ./config
COPY --from=build /app/src/http/openapi.yaml ./src/http/openapi.yaml
USER gatewayd
VOLUME ["/var/lib/gatewayd"]
EXPOSE 8080 1883 8883
STOPSIGNAL SIGTERM
CMD ["node", "--enable-source-maps", "dist/src/main.js"]

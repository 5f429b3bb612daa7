#!/usr/bin/env bash
# Installs gatewayd from this checkout as a systemd service:
#   sudo scripts/install.sh            install or upgrade to /opt/gatewayd and (re)start
# The store in /var/lib/gatewayd is kept across upgrades.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
src=$(cd "$(dirname "$0")/.." && pwd)
prefix=/opt/gatewayd

command -v node >/dev/null || { echo "Node.js >= 20.19 is required" >&2; exit 1; }
id gatewayd >/dev/null 2>&1 || useradd --system --user-group --home-dir /var/lib/gatewayd --shell /usr/sbin/nologin gatewayd

cd "$src"
npm ci --no-audit --no-fund
npm run build
npm prune --omit=dev

install -d -m 0755 "$prefix" /etc/gatewayd
rsync -a --delete --exclude .git --exclude data --exclude test --exclude .ci ./ "$prefix/" 2>/dev/null || cp -a . "$prefix/"
[ -f /etc/gatewayd/config.json ] || { echo '{}' > /etc/gatewayd/config.json; chmod 0640 /etc/gatewayd/config.json; chgrp gatewayd /etc/gatewayd/config.json; }
install -m 0644 systemd/gatewayd.service /etc/systemd/system/gatewayd.service
systemctl daemon-reload
systemctl enable gatewayd
systemctl restart gatewayd
echo "gatewayd installed; first start writes the admin password to /var/lib/gatewayd/initial-admin-password"

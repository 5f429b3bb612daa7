#!/usr/bin/env bash
# Installs gatewayd from this checkout as a systemd service:
#   sudo scripts/install.sh            install or upgrade and (re)start
# It builds in a clean temporary copy (your checkout, its node_modules, dist/ and data/ are not
# touched) and installs exactly the runtime files: dist/src, dist/ui, production node_modules,
# config/, package.json, package-lock.json, README.md, CHANGELOG.md and docs/*.md. The store in /var/lib/gatewayd, the
# configuration and the service files in /etc/gatewayd are kept across upgrades.
#
# Paths can be moved for packaging and tests: PREFIX (/opt/gatewayd), ETC_DIR (/etc/gatewayd),
# UNIT_DIR (/etc/systemd/system); SKIP_SYSTEMD=1 leaves systemctl alone, SKIP_USER=1 creates no
# user (files then stay owned by the caller).
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
prefix=${PREFIX:-/opt/gatewayd}
etc_dir=${ETC_DIR:-/etc/gatewayd}
unit_dir=${UNIT_DIR:-/etc/systemd/system}

fail() { echo "install: $*" >&2; exit 1; }
[ "${SKIP_USER:-}" = 1 ] || [ "$(id -u)" = 0 ] || fail "run as root (or set SKIP_USER=1 with paths you may write)"

node_bin=$(command -v node) || fail "Node.js is required (node not found on PATH)"
node_bin=$(readlink -f "$node_bin")
# engines.node of package.json is ">=MAJOR.MINOR": refuse an older Node before building anything.
required=$(sed -n 's/.*"node": *">=\([0-9.]*\)".*/\1/p' "$src/package.json" | head -n1)
"$node_bin" -e '
  const [want, have] = [process.argv[1], process.versions.node].map((v) => v.split(".").map(Number));
  for (let i = 0; i < 3; i++) { if ((have[i] ?? 0) > (want[i] ?? 0)) process.exit(0); if ((have[i] ?? 0) < (want[i] ?? 0)) process.exit(1); }
' "$required" || fail "Node.js >= $required is required, found $("$node_bin" --version) at $node_bin"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The sources only: no .git, no data/ (keys, the admin password), no build output, no modules.
tar -C "$src" --exclude=./.git --exclude=./data --exclude=./node_modules --exclude=./dist --exclude='./*.log' -cf - . | tar -C "$work" -xf -
(
  cd "$work"
  # No install scripts: npm ci's prepare script would build the tests too, and the one dependency
  # allowed a script (node-snap7, the S7 test server) is a test's; the runtime's native modules
  # ship prebuilt. What the service runs is built, and nothing else (src, the web UI, the
  # validators): on an ARM gateway that is minutes less.
  npm ci --ignore-scripts --no-audit --no-fund
  npm run build:runtime
  npm prune --omit=dev --no-audit --no-fund
)

if [ "${SKIP_USER:-}" != 1 ] && ! id gatewayd >/dev/null 2>&1; then
  useradd --system --user-group --home-dir /var/lib/gatewayd --shell /usr/sbin/nologin gatewayd
fi

install -d -m 0755 "$(dirname "$prefix")" "$etc_dir" "$unit_dir"
staging="$prefix.new"
rm -rf "$staging"
install -d -m 0755 "$staging" "$staging/dist"
cp -a "$work/dist/src" "$work/dist/ui" "$staging/dist/"
cp -a "$work/node_modules" "$work/config" "$work/package.json" "$work/package-lock.json" "$work/README.md" "$work/CHANGELOG.md" "$staging/"
# The README's links point into docs/ and to CHANGELOG.md: they go along (not the screenshots).
install -d -m 0755 "$staging/docs"
cp -a "$work"/docs/*.md "$staging/docs/"
# Swap in one step: a running service keeps its open files until the restart below.
rm -rf "$prefix.old"
if [ -e "$prefix" ]; then mv "$prefix" "$prefix.old"; fi
mv "$staging" "$prefix"
rm -rf "$prefix.old"

owner() { [ "${SKIP_USER:-}" = 1 ] || chown "$@"; }
[ -f "$etc_dir/config.json" ] || { echo '{}' > "$etc_dir/config.json"; chmod 0640 "$etc_dir/config.json"; owner root:gatewayd "$etc_dir/config.json"; }
if [ ! -f "$etc_dir/environment" ]; then
  # Secrets go here, not into config.json: readable by root and the service only.
  cat > "$etc_dir/environment" <<'ENV'
# Environment of the gatewayd service (mode 0640). The admin password of the first start:
#GATEWAYD_ADMIN_PASSWORD=
ENV
  chmod 0640 "$etc_dir/environment"
  owner root:gatewayd "$etc_dir/environment"
fi
install -d -m 0750 "$etc_dir/services"
owner gatewayd:gatewayd "$etc_dir/services"

sed "s|@NODE@|$node_bin|; s|/opt/gatewayd|$prefix|g; s|/etc/gatewayd|$etc_dir|g" "$src/systemd/gatewayd.service" > "$unit_dir/gatewayd.service"
chmod 0644 "$unit_dir/gatewayd.service"

if [ "${SKIP_SYSTEMD:-}" != 1 ]; then
  systemctl daemon-reload
  systemctl enable gatewayd
  systemctl restart gatewayd
  echo "gatewayd installed in $prefix; the first start writes the admin password to /var/lib/gatewayd/initial-admin-password unless $etc_dir/environment sets GATEWAYD_ADMIN_PASSWORD"
else
  echo "gatewayd installed in $prefix (systemd left alone)"
fi

#!/usr/bin/env bash
# Prints the initial admin password of a first start (operator helper), then reminds to change it.
set -euo pipefail
file="${GATEWAYD_DATA_DIR:-/var/lib/gatewayd}/initial-admin-password"
[ -r "$file" ] || { echo "no initial password file at $file (already removed, or GATEWAYD_ADMIN_PASSWORD was set)" >&2; exit 1; }
cat "$file"
echo "change it with PUT /api/users/change-password and delete $file" >&2

#!/usr/bin/env bash
# Debian packages the deploy test tier runs (tests/deploy): PostgreSQL's server, Redis and Chromium
# (Playwright drives Debian's chromium: its own browser download is not reachable from every machine).
# Installs only what is missing; as root directly, otherwise through passwordless sudo.
set -euo pipefail
need=()
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || need+=(postgresql)
command -v redis-server >/dev/null || need+=(redis-server)
[ -x /usr/bin/chromium ] || need+=(chromium)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ]; then
  SUDO=()
elif sudo -n true 2>/dev/null; then
  SUDO=(sudo -n)
else
  echo "error: the deploy tests need the Debian packages: ${need[*]} (run: sudo apt-get install ${need[*]})" >&2
  exit 2
fi
echo "installing Debian packages: ${need[*]}"
"${SUDO[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null

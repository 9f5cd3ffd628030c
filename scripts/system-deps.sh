#!/usr/bin/env bash
# Debian packages the test suite runs: the deploy tier's (tests/deploy) PostgreSQL server, Redis and Chromium
# (Playwright drives Debian's chromium: its own browser download is not reachable from every machine), and
# OpenSSH's server, which the integration tests start as their own sshd on a free port of 127.0.0.1
# (harness/kip848_harness/sshd.py). Its package must not start the system's ssh service: the install
# runs with a policy-rc.d that forbids starting services, so nothing listens on port 22 afterwards.
# Installs only what is missing; as root directly, otherwise through passwordless sudo.
set -euo pipefail
need=()
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || need+=(postgresql)
command -v redis-server >/dev/null || need+=(redis-server)
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ]; then
  SUDO=()
elif sudo -n true 2>/dev/null; then
  SUDO=(sudo -n)
else
  echo "error: the tests need the Debian packages: ${need[*]} (run: sudo apt-get install ${need[*]})" >&2
  exit 2
fi
# invoke-rc.d asks /usr/sbin/policy-rc.d before a package's postinst starts its service; 101 = "not allowed".
# A policy that is already there (Docker images ship one) is left as it is; ours is removed afterwards.
POLICY=/usr/sbin/policy-rc.d
if [ ! -e "$POLICY" ]; then
  printf '#!/bin/sh\n# scripts/system-deps.sh: no service starts during this install\nexit 101\n' \
    | "${SUDO[@]}" tee "$POLICY" >/dev/null
  "${SUDO[@]}" chmod 0755 "$POLICY"
  trap '"${SUDO[@]}" rm -f "$POLICY"' EXIT
fi
echo "installing Debian packages: ${need[*]}"
"${SUDO[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null

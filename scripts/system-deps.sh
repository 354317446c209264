#!/usr/bin/env bash
# Installs the Debian packages pdctl's engine and tests need, once. Idempotent; needs root (as in CI).
set -euo pipefail
need=()
dpkg -s libibverbs1 >/dev/null 2>&1 || need+=(libibverbs1)
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then echo "system-deps: need root to apt-get install ${need[*]}" >&2; exit 1; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

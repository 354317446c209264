#!/usr/bin/env bash
# Installs the Debian packages pdctl's engine and tests need, once. Idempotent; needs root (as in CI) for
# anything missing. The Slurm packages (for tests/launch/test_slurm.py's real single-node Slurm and the
# multi-node one of tests/launch/test_slurm_multinode.py) are
# installed only when run as root; without root they are optional and that test skips with the reason.
set -euo pipefail
need=()
dpkg -s libibverbs1 >/dev/null 2>&1 || need+=(libibverbs1)
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# (not ucx-utils: Debian's pulls ibverbs-providers, whose system libefa/libibverbs NIXL's bundled UCX then
#  loads next to its own copies, and every process that used NIXL crashes at exit; preflight's `ucx_info -d`
#  check is a warning where ucx_info is missing)
command -v nsenter >/dev/null 2>&1 || need+=(util-linux)       # multi-host tests: nsenter, unshare, mount
command -v ip >/dev/null 2>&1 || need+=(iproute2)              # multi-host tests: netns, veth, bridge
command -v curl >/dev/null 2>&1 || need+=(curl)                # the sbatch script waits on /health with curl
if [ "$(id -u)" = 0 ]; then
  for pkg in slurmctld slurmd slurm-client munge; do
    dpkg -s "$pkg" 2>/dev/null | grep -q '^Status: install ok installed' || need+=("$pkg")
  done
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then echo "system-deps: need root to apt-get install ${need[*]}" >&2; exit 1; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # policy-rc.d 101: the packages' maintainer scripts must not start daemons (munge, slurmd, slurmctld);
  # the Slurm test starts and stops its own (scripts/slurm/single-node.sh)
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy"
    trap 'rm -f "$policy"' EXIT
  fi
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

#!/usr/bin/env bash
# `pip install` for the Makefile and the SGLang build scripts, through uv when $PDCTL_UV names it (the Makefile puts a
# pinned uv in .venv: `make install`), else through PYTHON's own pip.
#   scripts/pip-install.sh PYTHON [pip install arguments ...]
# Why uv: a bare-machine install (`make test` in CI) spends most of its install time in pip unpacking wheels one
# at a time and asking every index serially; uv downloads and unpacks in parallel and links each wheel from
# its cache, so torch, transformers and the pins every SGLang overlay shares are unpacked once (docs/testing.md
# has the numbers). uv reads no pip configuration: this script hands it the machine's pip configuration
# (`pip config list`: index-url, extra-index-url, find-links, constraint, from pip.conf and PIP_* variables),
# and picks the best version over all indexes, as pip does (uv's default would stop at the first index that
# has the package at all).
set -euo pipefail
python=${1:?usage: pip-install.sh PYTHON [pip install arguments ...]}
shift
if [ -z "${PDCTL_UV:-}" ] || [ ! -x "$PDCTL_UV" ]; then
  exec "$python" -m pip install "$@"
fi
flags=()
declare -A seen=()
add() {  # add FLAG VALUE once
  [ -n "${seen["$1 $2"]:-}" ] && return
  seen["$1 $2"]=1
  flags+=("$1" "$2")
}
# lines like global.find-links='/opt/wheels' or :env:.extra-index-url='file:///a file:///b'
while IFS= read -r line; do
  key=${line%%=*}
  value=${line#*=}
  value=${value#\'}
  value=${value%\'}
  case ${key##*.} in
    index-url) add --index-url "$value" ;;
    extra-index-url) for v in $value; do add --extra-index-url "$v"; done ;;
    find-links) for v in $value; do add --find-links "$v"; done ;;
    constraint) for v in $value; do add --constraint "$v"; done ;;
  esac
done < <("$python" -m pip config list 2>/dev/null || true)
exec "$PDCTL_UV" pip install --python "$python" --index-strategy unsafe-best-match "${flags[@]}" "$@"

#!/usr/bin/env bash
# idemctl from the source tree, in one command: builds the idemctl target
# only (the `packages` configure preset, build tree build/packages, with
# ccache; tests and benchmarks are not built) and runs it with the
# arguments, in the caller's working directory (a relative store path is
# the caller's). What idemctl does: docs/OPERATIONS.md.
#
#   scripts/idemctl.sh --store sqlite:/var/lib/app/idem.db inspect --scope alice --key order-1
#   scripts/idemctl.sh --version
#
# The build says nothing unless it fails; then its log goes to stderr and
# the exit status is 125 (idemctl's own are 0-3). Needs the packages
# scripts/deps.sh installs (CLI11 among them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
log=$root/build/idemctl.sh.log
mkdir -p "$root/build"
if ! (cd "$root" && cmake --preset packages && cmake --build build/packages -j "$(nproc)" --target idemctl) >"$log" 2>&1; then
  cat "$log" >&2
  echo "idemctl.sh: building idemctl failed (log above, and in $log)" >&2
  exit 125
fi
exec "$root/build/packages/tools/idemctl/idemctl" "$@"

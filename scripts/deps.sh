#!/usr/bin/env bash
# Installs the Debian packages idem needs to build, test and run its demo.
# A no-op when everything is present; needs root (or sudo) otherwise.
set -euo pipefail

packages=(
  build-essential cmake pkg-config ccache git python3 lld
  g++ clang libclang-rt-14-dev clang-format
  libssl-dev libexpected-dev nlohmann-json3-dev liburiparser-dev libzstd-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libboost1.74-dev libboost-program-options1.74-dev
  librocksdb-dev libsqlite3-dev sqlite3
  libpq-dev postgresql
  libhiredis-dev redis-server redis-tools
  librestinio-dev libasio-dev libfmt-dev libhttp-parser-dev libcli11-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  curl wrk
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "deps.sh: installing ${missing[*]}"
sudo=()
[[ $(id -u) -eq 0 ]] || sudo=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# The package stage of scripts/test.sh: makes the .deb packages of a built
# tree (cpack), checks what each holds and depends on, and builds and runs
# tests/install_consumer against them the way a user would, once per store
# with CMake's find_package and once with pkg-config, each time on a scratch
# root holding only libidem-dev and that store's package (dpkg -x: no root
# needed, nothing installed on the machine), and once per adapter with
# find_package on libidem-dev, libidem-asio-dev and the adapter's package
# (the gRPC adapter with pkg-config idem-grpc as well).
# The README's "Use the core" program is built with its pkg-config line
# against libidem-stores-dev and run.
# Every package carries usr/share/doc/<package>/copyright naming Apache-2.0,
# and the programs' --version says the packages' version.
#
#   scripts/packages.sh BUILD_DIR WORK_DIR
#
# BUILD_DIR: a configured and built tree (build/main). WORK_DIR: scratch
# roots and one consumer build tree per store, reused between runs.
# Environment: IDEM_TEST_POSTGRES_URI and IDEM_TEST_REDIS_URI, the servers
# the postgres and redis consumers run against; without one that consumer
# is built but not run, and under CI (CI set) that fails the stage.
set -euo pipefail
build=$(realpath "$1")
mkdir -p "$2"
work=$(realpath "$2")
root=$(realpath "$(dirname "$0")/..")
consumer_src=$root/tests/install_consumer
fail() { echo "packages.sh: $*" >&2; exit 1; }

# 1. The packages.
rm -rf "$build/packages"
(cd "$build" && cpack -G DEB >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; fail "cpack failed"; }
declare -A deb=()  # package name -> .deb file
for f in "$build"/packages/*.deb; do
  deb[$(dpkg-deb -f "$f" Package)]=$f
done
version=$(dpkg-deb -f "${deb[libidem-dev]:?no libidem-dev package}" Version)

# The packages this build must have made: one per store and adapter it
# built, idem-demo with the Beast adapter, idem-grpc-demo with the gRPC
# adapter, idemctl when it is built.
expected=(libidem-dev libidem-stores-dev)
built() { [[ -n $(find "$build" -name "$1" -type f -print -quit) ]]; }
for part in rocksdb sqlite postgres redis asio beast restinio grpc testing; do
  if built "libidem_$part.a"; then expected+=("libidem-$part-dev"); fi
done
if built idem-demo; then expected+=(idem-demo); fi
if built idem-grpc-demo; then expected+=(idem-grpc-demo); fi
if built idemctl; then expected+=(idemctl); fi
made=$(printf '%s ' "${!deb[@]}" | tr ' ' '\n' | sort | xargs)
wanted=$(printf '%s ' "${expected[@]}" | tr ' ' '\n' | sort | xargs)
[[ $made == "$wanted" ]] || fail "packages made: $made; expected: $wanted"

# 2. What each package holds: every file in one package only (a store's
# package does not carry core headers again), and the files a user needs
# where they belong.
listing=$work/listing
: >"$listing"
for p in "${!deb[@]}"; do
  dpkg-deb -c "${deb[$p]}" | awk -v p="$p" '$1 !~ /^d/ {sub(/^\.\//, "", $6); print p, $6}' >>"$listing"
done
! grep -E ' usr/include/.*\.in$' "$listing" || fail "header templates (*.in) packaged"
dups=$(awk '{print $2}' "$listing" | sort | uniq -d)
[[ -z $dups ]] || fail "files in more than one package: $dups"
holds() {  # package, path...
  local p=$1; shift
  for path in "$@"; do
    grep -qxF "$p $path" "$listing" || fail "$p does not hold $path"
  done
}
lib=usr/lib cmake=usr/lib/cmake/idem pc=usr/lib/pkgconfig
holds libidem-dev usr/include/idem/guard.h usr/include/idem/version.h usr/include/idem/memory_store.h \
  $lib/libidem_core.a $lib/libidem_memory.a \
  $cmake/idemConfig.cmake $cmake/idemConfigVersion.cmake $cmake/idem-core-targets.cmake $cmake/idem-memory-targets.cmake \
  $pc/idem.pc $pc/idem-memory.pc
holds libidem-stores-dev usr/include/idem/open_store.h $lib/libidem_stores.a $cmake/idem-stores-targets.cmake $pc/idem-stores.pc
for store in rocksdb sqlite postgres redis; do
  [[ -n ${deb[libidem-$store-dev]:-} ]] || continue
  holds "libidem-$store-dev" "usr/include/idem/${store}_store.h" "$lib/libidem_$store.a" \
    "$cmake/idem-$store-targets.cmake" "$pc/idem-$store.pc"
  # Its own headers only: idem/<store>_*.h (the store, its transaction).
  ! grep "^libidem-$store-dev usr/include/" "$listing" | grep -qv " usr/include/idem/${store}_" ||
    fail "libidem-$store-dev holds other headers than its own"
done
for adapter in asio beast restinio grpc; do
  [[ -n ${deb[libidem-$adapter-dev]:-} ]] || continue
  holds "libidem-$adapter-dev" "usr/include/idem/$adapter/handler.h" "$lib/libidem_$adapter.a" \
    "$cmake/idem-$adapter-targets.cmake" "$pc/idem-$adapter.pc"
done
[[ -z ${deb[idem-demo]:-} ]] || holds idem-demo usr/bin/idem-demo
[[ -z ${deb[idem-grpc-demo]:-} ]] || holds idem-grpc-demo usr/bin/idem-grpc-demo
[[ -z ${deb[idemctl]:-} ]] || holds idemctl usr/bin/idemctl
# The license: LICENSE with the headers, and every package's Debian
# copyright file naming it.
holds libidem-dev usr/share/doc/idem/LICENSE
for p in "${!deb[@]}"; do
  holds "$p" "usr/share/doc/$p/copyright"
  copyright=$(dpkg-deb --fsys-tarfile "${deb[$p]}" | tar -xOf - "./usr/share/doc/$p/copyright")
  grep -qx 'License: Apache-2.0' <<<"$copyright" ||
    fail "$p: usr/share/doc/$p/copyright does not name the license (License: Apache-2.0)"
done

# The static libraries without debug information, like the programs
# (CPACK_STRIP_FILES; idem_add_library strips the libraries): the -dev
# packages are for building against, not for debugging idem.
for p in "${!deb[@]}"; do
  [[ $p == libidem-*-dev || $p == libidem-dev ]] || continue
  unpacked=$work/strip-$p
  rm -rf "$unpacked" && dpkg -x "${deb[$p]}" "$unpacked"
  while IFS= read -r archive; do
    ! readelf -S "$archive" 2>/dev/null | grep -q '\.debug_info' || fail "$p: ${archive#"$unpacked"/} has debug information"
  done < <(find "$unpacked" -name '*.a')
  rm -rf "$unpacked"
done

# 3. Each package's synopsis and version, and what it depends on: libidem-dev at this very version for
# every other library package, and every other dependency a Debian package
# installed here at a version that satisfies it (so the names are right:
# scripts/deps.sh installs them all).
for p in "${!deb[@]}"; do
  synopsis=$(dpkg-deb -f "${deb[$p]}" Description | sed -n 1p)
  [[ -n $synopsis && $synopsis != *"built using CMake"* ]] || fail "$p: no synopsis of its own: $synopsis"
  [[ $(dpkg-deb -f "${deb[$p]}" Version) == "$version" ]] || fail "$p: another version than libidem-dev's $version"
  depends=$(dpkg-deb -f "${deb[$p]}" Depends)
  if [[ $p == libidem-*-dev ]]; then
    [[ ", $depends," == *", libidem-dev (= $version),"* ]] || fail "$p: Depends lacks libidem-dev (= $version): $depends"
  fi
  [[ $p != idem-demo && $p != idem-grpc-demo && $p != idemctl ]] || [[ $depends == *libc6* ]] || fail "$p: no shared library dependencies (dpkg-shlibdeps): $depends"
  IFS=',' read -ra clauses <<<"$depends"
  for clause in "${clauses[@]}"; do
    satisfied=
    IFS='|' read -ra alternatives <<<"$clause"
    for alt in "${alternatives[@]}"; do
      read -r name op want <<<"$(echo "$alt" | tr -d '()')"
      [[ $name == libidem-* ]] && { satisfied=1; break; }
      have=$(dpkg-query -W -f='${Version}' "$name" 2>/dev/null) || continue
      [[ -z $op ]] || dpkg --compare-versions "$have" "$op" "$want" || continue
      satisfied=1; break
    done
    [[ -n $satisfied ]] || fail "$p: dependency '$clause' is not an installed Debian package here"
  done
done

# 4. The programs run from their unpacked packages (their shared libraries
# are the Debian ones their Depends name).
for p in idem-demo idem-grpc-demo idemctl; do
  [[ -n ${deb[$p]:-} ]] || continue
  rm -rf "$work/root-$p"
  dpkg -x "${deb[$p]}" "$work/root-$p"
  "$work/root-$p/usr/bin/$p" --help >"$work/$p-help.log" 2>&1 || { cat "$work/$p-help.log"; fail "$p --help fails when unpacked"; }
  said=$("$work/root-$p/usr/bin/$p" --version 2>&1) || fail "$p --version fails when unpacked: $said"
  # "<program> <version>", and what else it was built with in parentheses
  # (idem-grpc-demo: "(gRPC 1.51.1)").
  [[ $said == "$p $version" || $said == "$p $version ("*")" ]] ||
    fail "$p --version says '$said', not '$p $version'"
done

# 5. The consumer against each store's packages.
run_uri() {  # store -> the URI its consumer opens ("" = no server)
  case $1 in
    memory) echo "memory:?capacity=10" ;;
    rocksdb) echo "rocksdb:$work/data/rocksdb" ;;
    sqlite) echo "sqlite:$work/data/consumer.db" ;;
    postgres) echo "${IDEM_TEST_POSTGRES_URI:-}" ;;
    redis) echo "${IDEM_TEST_REDIS_URI:-}" ;;
  esac
}
results=()
for store in memory rocksdb sqlite postgres redis; do
  packages=(libidem-dev)
  if [[ $store != memory ]]; then
    [[ -n ${deb[libidem-$store-dev]:-} ]] || continue
    packages+=("libidem-$store-dev")
  fi
  scratch=$work/root-$store out=$work/consumer-$store
  rm -rf "$scratch" "$work/data"
  mkdir -p "$scratch" "$out" "$work/data"
  for p in "${packages[@]}"; do dpkg -x "${deb[$p]}" "$scratch"; done
  # CMake: the installed package config, component $store.
  cmake -S "$consumer_src" -B "$out/cmake" -DCMAKE_PREFIX_PATH="$scratch/usr" \
    -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON -DCMAKE_CXX_COMPILER_LAUNCHER="$(command -v ccache || true)" \
    -DIDEM_CONSUMER_STORE=$store >"$out/cmake.log" 2>&1 || { cat "$out/cmake.log"; fail "$store: find_package(idem COMPONENTS $store) failed"; }
  grep -q "$scratch/usr/lib/cmake/idem" "$out/cmake/CMakeCache.txt" || fail "$store: CMake found another idem than the unpacked one"
  cmake --build "$out/cmake" >"$out/build.log" 2>&1 || { cat "$out/build.log"; fail "$store: the CMake consumer does not build"; }
  # pkg-config: the store's module (memory's is idem-memory), which
  # requires idem; a plain --libs is a complete link line.
  export PKG_CONFIG_PATH=$scratch/usr/lib/pkgconfig
  pkg-config --cflags --libs idem >/dev/null || fail "pkg-config idem fails on the unpacked tree"
  flags=$(pkg-config --cflags --libs "idem-$store") || fail "pkg-config idem-$store fails on the unpacked tree"
  [[ $flags == *"-I$scratch/usr/lib/pkgconfig/../../include"* ]] || fail "pkg-config idem-$store: not the unpacked tree: $flags"
  # shellcheck disable=SC2086  # $flags is a list of flags.
  $(command -v ccache || true) g++ -std=c++20 "-DIDEM_CONSUMER_HEADER=<idem/${store}_store.h>" \
    "-DIDEM_CONSUMER_CLASS=idem::${store^}Store" -o "$out/consumer-pkg-config" "$consumer_src/main.cc" $flags ||
    fail "$store: the pkg-config consumer does not build"
  unset PKG_CONFIG_PATH
  if [[ $store == memory && -n ${deb[libidem-sqlite-dev]:-} ]]; then
    # libidem-dev alone: a store's component is missing, and says so.
    if cmake -S "$consumer_src" -B "$work/consumer-missing" -DCMAKE_PREFIX_PATH="$scratch/usr" \
      -DIDEM_CONSUMER_STORE=sqlite >"$work/consumer-missing.log" 2>&1; then
      fail "find_package(idem COMPONENTS sqlite) succeeds without libidem-sqlite-dev"
    fi
    grep -q "idem component sqlite is not installed" "$work/consumer-missing.log" ||
      { cat "$work/consumer-missing.log"; fail "find_package(idem COMPONENTS sqlite) without its package: no clear message"; }
  fi
  uri=$(run_uri "$store")
  if [[ -z $uri ]]; then
    [[ -z ${CI:-} ]] || fail "$store: no server to run the consumer against (CI is set)"
    results+=("$store: built with find_package and pkg-config (not run: no server)")
    continue
  fi
  "$out/cmake/consumer" "$uri" >/dev/null || fail "$store: the CMake consumer failed on $store"
  "$out/consumer-pkg-config" "$uri" >/dev/null || fail "$store: the pkg-config consumer failed on $store"
  results+=("$store: find_package and pkg-config consumers ran")
done
# 5b. The README's "Use the core" program, as written there, built with the
# README's pkg-config line against libidem-stores-dev and what it depends
# on, and run twice in a scratch directory: the handler runs once in all.
readme=$work/readme
rm -rf "$readme"
mkdir -p "$readme/root" "$readme/run"
stores_packages=(libidem-dev libidem-stores-dev)
for store in rocksdb sqlite postgres redis; do
  [[ -z ${deb[libidem-$store-dev]:-} ]] || stores_packages+=("libidem-$store-dev")
done
for p in "${stores_packages[@]}"; do dpkg -x "${deb[$p]}" "$readme/root"; done
awk '/^## Use the core/ {on = 1} on && /^```cpp$/ {code = 1; next} code && /^```$/ {exit} code' \
  "$root/README.md" >"$readme/app.cc"
[[ -s $readme/app.cc ]] || fail "README.md: no cpp block under \"Use the core\""
(
  cd "$readme/run"
  export PKG_CONFIG_PATH=$readme/root/usr/lib/pkgconfig
  # shellcheck disable=SC2046  # The README's line, as written.
  $(command -v ccache || true) g++ -std=c++20 ../app.cc $(pkg-config --cflags --libs idem-stores) -o app >../build.log 2>&1 ||
    { cat ../build.log; fail "README's program does not build with pkg-config idem-stores"; }
  ./app >../run1.log 2>&1 && ./app >../run2.log 2>&1 || { cat ../run1.log ../run2.log; fail "README's program failed"; }
  [[ $(cat ../run1.log ../run2.log | grep -c 'creating the order') == 1 ]] ||
    { cat ../run1.log ../run2.log; fail "README's program ran its handler other than once"; }
)
results+=("README: its program built with pkg-config idem-stores and ran")

# 6. Each adapter against its packages (libidem-dev, libidem-asio-dev,
# its own): find_package(idem COMPONENTS <adapter>), its program built and
# run (tests/install_consumer/adapter.cc; grpc.cc, a real gRPC server and
# client). Without its package the component is missing, and says so.
for adapter in beast restinio grpc; do
  [[ -n ${deb[libidem-$adapter-dev]:-} ]] || continue
  scratch=$work/root-$adapter out=$work/consumer-$adapter
  rm -rf "$scratch" "$out"
  mkdir -p "$scratch" "$out"
  for p in libidem-dev libidem-asio-dev; do dpkg -x "${deb[$p]}" "$scratch"; done
  if cmake -S "$consumer_src" -B "$out/missing" -DCMAKE_PREFIX_PATH="$scratch/usr" \
    -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON -DIDEM_CONSUMER_STORE=memory \
    -DIDEM_CONSUMER_ADAPTERS=$adapter >"$out/missing.log" 2>&1; then
    fail "find_package(idem COMPONENTS $adapter) succeeds without libidem-$adapter-dev"
  fi
  grep -q "idem component $adapter is not installed" "$out/missing.log" ||
    { cat "$out/missing.log"; fail "find_package(idem COMPONENTS $adapter) without its package: no clear message"; }
  dpkg -x "${deb[libidem-$adapter-dev]}" "$scratch"
  cmake -S "$consumer_src" -B "$out/cmake" -DCMAKE_PREFIX_PATH="$scratch/usr" \
    -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON -DCMAKE_CXX_COMPILER_LAUNCHER="$(command -v ccache || true)" \
    -DIDEM_CONSUMER_STORE=memory -DIDEM_CONSUMER_ADAPTERS=$adapter >"$out/cmake.log" 2>&1 ||
    { cat "$out/cmake.log"; fail "$adapter: find_package(idem COMPONENTS $adapter) failed"; }
  grep -q "$scratch/usr/lib/cmake/idem" "$out/cmake/CMakeCache.txt" || fail "$adapter: CMake found another idem than the unpacked one"
  cmake --build "$out/cmake" --target "consumer-$adapter" >"$out/build.log" 2>&1 ||
    { cat "$out/build.log"; fail "$adapter: the adapter consumer does not build"; }
  "$out/cmake/consumer-$adapter" >/dev/null || fail "$adapter: the adapter consumer failed"
  if [[ $adapter != grpc ]]; then
    results+=("$adapter: find_package consumer ran")
    continue
  fi
  # pkg-config idem-grpc (with idem-memory, the consumer's store): a plain
  # --libs is a complete link line, gRPC's and protobuf's included.
  export PKG_CONFIG_PATH=$scratch/usr/lib/pkgconfig
  flags=$(pkg-config --cflags --libs idem-grpc idem-memory) || fail "pkg-config idem-grpc fails on the unpacked tree"
  [[ $flags == *"-I$scratch/usr/lib/pkgconfig/../../include"* ]] || fail "pkg-config idem-grpc: not the unpacked tree: $flags"
  mkdir -p "$out/pkg-config"
  protoc --proto_path="$consumer_src" --cpp_out="$out/pkg-config" --grpc_out="$out/pkg-config" \
    --plugin=protoc-gen-grpc="$(command -v grpc_cpp_plugin)" "$consumer_src/counter.proto" ||
    fail "grpc: protoc on the consumer's counter.proto failed"
  # shellcheck disable=SC2086  # $flags is a list of flags.
  $(command -v ccache || true) g++ -std=c++20 -I"$out/pkg-config" -o "$out/consumer-pkg-config" "$consumer_src/grpc.cc" \
    "$out/pkg-config/counter.pb.cc" "$out/pkg-config/counter.grpc.pb.cc" $flags ||
    fail "grpc: the pkg-config consumer does not build"
  unset PKG_CONFIG_PATH
  "$out/consumer-pkg-config" >/dev/null || fail "grpc: the pkg-config consumer failed"
  results+=("grpc: find_package and pkg-config consumers ran")
done
# 7. The conformance kit: a store written outside the tree
# (tests/store_kit_consumer) built on libidem-dev and libidem-testing-dev
# alone with find_package(idem COMPONENTS testing), and its contract run.
if [[ -n ${deb[libidem-testing-dev]:-} ]]; then
  holds libidem-testing-dev usr/include/idem/testing/store_contract.h "$lib/libidem_testing.a" \
    "$cmake/idem-testing-targets.cmake" "$pc/idem-testing.pc"
  scratch=$work/root-testing out=$work/store-kit-consumer
  rm -rf "$scratch" "$out"
  mkdir -p "$scratch" "$out"
  for p in libidem-dev libidem-testing-dev; do dpkg -x "${deb[$p]}" "$scratch"; done
  cmake -S "$root/tests/store_kit_consumer" -B "$out" -DCMAKE_PREFIX_PATH="$scratch/usr" \
    -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON -DCMAKE_CXX_COMPILER_LAUNCHER="$(command -v ccache || true)" \
    >"$out.cmake.log" 2>&1 || { cat "$out.cmake.log"; fail "find_package(idem COMPONENTS testing) failed"; }
  grep -q "$scratch/usr/lib/cmake/idem" "$out/CMakeCache.txt" || fail "store kit: CMake found another idem than the unpacked one"
  cmake --build "$out" >"$out.build.log" 2>&1 || { cat "$out.build.log"; fail "the store kit consumer does not build"; }
  "$out/map_store_test" >"$out.run.log" 2>&1 || { tail -50 "$out.run.log"; fail "the store kit consumer's contract failed"; }
  results+=("testing: a store outside the tree passed the installed contract kit ($(grep -o '[0-9]* tests* from' "$out.run.log" | tail -1 | cut -d' ' -f1) rows)")
fi
echo "packages.sh: ${#deb[@]} packages of idem $version checked (files, Depends); $(printf '%s; ' "${results[@]}" | sed 's/; $//')"

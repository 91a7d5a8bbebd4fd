# Findzstd: libzstd through pkg-config (Debian's libzstd-dev ships a
# libzstd.pc; its CMake package is not in every Debian 12 install), as the
# imported target zstd::zstd. Sets zstd_FOUND and zstd_VERSION. Installed
# beside idemConfig.cmake for the consumers of idem::core, which compresses
# stored responses with it.
include(${CMAKE_CURRENT_LIST_DIR}/IdemFindPkgConfig.cmake)
idem_find_pkg_config(zstd libzstd zstd::zstd)

# Findhiredis: hiredis through pkg-config (Debian's libhiredis-dev ships a
# hiredis.pc but no CMake package), as the imported target hiredis::hiredis,
# so that idem_option(... PACKAGE hiredis 0.14) treats it like any package.
# Sets hiredis_FOUND and hiredis_VERSION. Installed beside idemConfig.cmake
# for the consumers of the exported idem::redis.
include(${CMAKE_CURRENT_LIST_DIR}/IdemFindPkgConfig.cmake)
idem_find_pkg_config(hiredis hiredis hiredis::hiredis)

# Findhiredis: hiredis through pkg-config (Debian's libhiredis-dev ships a
# hiredis.pc but no CMake package), as the imported target hiredis::hiredis,
# so that idem_option(... PACKAGE hiredis 0.14) treats it like any package.
# Sets hiredis_FOUND and hiredis_VERSION. Installed beside idemConfig.cmake
# for the consumers of the exported idem::redis.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(IDEM_HIREDIS QUIET IMPORTED_TARGET hiredis)
endif()
set(hiredis_VERSION ${IDEM_HIREDIS_VERSION})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(hiredis
  REQUIRED_VARS IDEM_HIREDIS_LINK_LIBRARIES
  VERSION_VAR hiredis_VERSION)
if(hiredis_FOUND AND NOT TARGET hiredis::hiredis)
  add_library(hiredis::hiredis INTERFACE IMPORTED)
  target_link_libraries(hiredis::hiredis INTERFACE PkgConfig::IDEM_HIREDIS)
endif()

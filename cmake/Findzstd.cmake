# Findzstd: libzstd through pkg-config (Debian's libzstd-dev ships a
# libzstd.pc; its CMake package is not in every Debian 12 install), as the
# imported target zstd::zstd. Sets zstd_FOUND and zstd_VERSION. Installed
# beside idemConfig.cmake for the consumers of idem::core, which compresses
# stored responses with it.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(IDEM_ZSTD QUIET IMPORTED_TARGET libzstd)
endif()
set(zstd_VERSION ${IDEM_ZSTD_VERSION})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(zstd
  REQUIRED_VARS IDEM_ZSTD_LINK_LIBRARIES
  VERSION_VAR zstd_VERSION)
if(zstd_FOUND AND NOT TARGET zstd::zstd)
  add_library(zstd::zstd INTERFACE IMPORTED)
  target_link_libraries(zstd::zstd INTERFACE PkgConfig::IDEM_ZSTD)
endif()

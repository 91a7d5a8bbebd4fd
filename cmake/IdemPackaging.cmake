# What a user installs: the version header, the CMake package
# (idemConfig.cmake and one export file per library), one pkg-config file
# per library, and the .deb packages CPack makes of them (`cpack` in the
# build tree after the build; scripts/test.sh's package stage).
#
# Install components, one .deb package each:
#   dev      libidem-dev          core + memory store, version.h, the CMake
#                                 package's config, idem.pc, idem-memory.pc
#   <store>  libidem-<store>-dev  one per other store (rocksdb, sqlite,
#                                 postgres, redis): its library, header,
#                                 export file and .pc
#   stores   libidem-stores-dev   idem::stores (OpenStore over every store
#                                 this build has, so it depends on them all)
#   asio     libidem-asio-dev     idem::asio, what the Asio adapters share
#   beast    libidem-beast-dev    the Boost.Beast adapter
#   restinio libidem-restinio-dev the RESTinio adapter
#   demo     idem-demo            the demo server
#   idemctl  idemctl              the operator's tool (tools/idemctl installs
#                                 into this component when it is built)
# The libraries are static archives, so the -dev packages are all there is
# to a library (no runtime package); the two programs get their shared
# library dependencies from dpkg-shlibdeps.

# idem_version_header(): core/include/idem/version.h from project(VERSION),
# generated into the build tree's include directory (on idem::core's include
# path) and installed with libidem-dev.
function(idem_version_header)
  set(out ${PROJECT_BINARY_DIR}/include/idem/version.h)
  configure_file(${PROJECT_SOURCE_DIR}/core/include/idem/version.h.in ${out} @ONLY)
  target_include_directories(idem_core PUBLIC $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>)
  install(FILES ${out} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/idem COMPONENT dev)
endfunction()

# What each library's pkg-config file requires besides its own archive. The
# archives are static, so what a shared library would keep in
# Requires.private / Libs.private is needed by every link: it is in Requires
# and Libs, and `pkg-config --libs idem-sqlite` is a complete link line.
set(_idem_v "= ${PROJECT_VERSION}")
set(IDEM_PC_REQUIRES_core "libcrypto >= 3, liburiparser >= 0.9, libzstd >= 1.4")
set(IDEM_PC_REQUIRES_memory "idem ${_idem_v}")
set(IDEM_PC_REQUIRES_rocksdb "idem ${_idem_v}, rocksdb >= 7")
set(IDEM_PC_REQUIRES_sqlite "idem ${_idem_v}, sqlite3 >= 3.35")
set(IDEM_PC_REQUIRES_postgres "idem ${_idem_v}, libpq >= 12")
set(IDEM_PC_REQUIRES_redis "idem ${_idem_v}, hiredis >= 0.14, libcrypto >= 3")
set(IDEM_PC_REQUIRES_asio "idem ${_idem_v}")  # Boost ships no .pc: headers only.
set(IDEM_PC_REQUIRES_beast "idem ${_idem_v}, idem-asio ${_idem_v}")
# RESTinio ships no .pc (headers only); it links fmt.
set(IDEM_PC_REQUIRES_restinio "idem ${_idem_v}, idem-asio ${_idem_v}, fmt")

# The Debian packages a library's -dev package depends on (Debian 12 names;
# the minimum versions are the ones the top-level find_package calls ask
# for), besides libidem-dev itself.
set(IDEM_DEB_DEPENDS_dev
  "libssl-dev (>= 3), libexpected-dev, nlohmann-json3-dev (>= 3.10), liburiparser-dev (>= 0.9), libzstd-dev (>= 1.4), pkg-config")  # cmake/Findzstd.cmake
set(IDEM_DEB_DEPENDS_rocksdb "librocksdb-dev (>= 7)")
set(IDEM_DEB_DEPENDS_sqlite "libsqlite3-dev (>= 3.35)")
set(IDEM_DEB_DEPENDS_postgres "libpq-dev (>= 12)")
set(IDEM_DEB_DEPENDS_redis "libhiredis-dev (>= 0.14), pkg-config")  # cmake/Findhiredis.cmake
set(IDEM_DEB_DEPENDS_asio "libboost-dev (>= 1.74) | libboost1.74-dev")
set(IDEM_DEB_DEPENDS_beast "libboost-dev (>= 1.74) | libboost1.74-dev")
set(IDEM_DEB_DEPENDS_restinio "librestinio-dev, libfmt-dev")
# The idem packages a component's libraries link besides libidem-dev.
set(IDEM_DEB_IDEM_DEPENDS_beast asio)
set(IDEM_DEB_IDEM_DEPENDS_restinio asio)

set(IDEM_DEB_SUMMARY_dev "core, memory store, CMake and pkg-config files")
set(IDEM_DEB_SUMMARY_rocksdb "embedded RocksDB store")
set(IDEM_DEB_SUMMARY_sqlite "embedded SQLite store")
set(IDEM_DEB_SUMMARY_postgres "PostgreSQL store")
set(IDEM_DEB_SUMMARY_redis "Redis and Redis Cluster store")
set(IDEM_DEB_SUMMARY_stores "OpenStore over every store")
set(IDEM_DEB_SUMMARY_asio "the Asio adapters' shared layer")
set(IDEM_DEB_SUMMARY_beast "Boost.Beast adapter")
set(IDEM_DEB_SUMMARY_restinio "RESTinio adapter")

# idem_pkg_config(<library>): idem.pc for core, idem-<library>.pc otherwise,
# in ${CMAKE_INSTALL_LIBDIR}/pkgconfig, installed with the library's
# component. The prefix is relative to the .pc file's own folder, so a tree
# unpacked elsewhere (dpkg -x) works with PKG_CONFIG_PATH alone.
function(idem_pkg_config name)
  get_property(component GLOBAL PROPERTY IDEM_LIBRARY_${name}_COMPONENT)
  if(name STREQUAL "core")
    set(IDEM_PC_MODULE idem)
  else()
    set(IDEM_PC_MODULE idem-${name})
  endif()
  set(IDEM_PC_LIBRARY idem_${name})
  set(IDEM_PC_REQUIRES "${IDEM_PC_REQUIRES_${name}}")
  if(name STREQUAL "stores")
    # Every store OpenStore dispatches to.
    get_property(backends GLOBAL PROPERTY IDEM_BACKENDS)
    set(IDEM_PC_REQUIRES "idem ${_idem_v}")
    foreach(b IN LISTS backends)
      string(APPEND IDEM_PC_REQUIRES ", idem-${b} ${_idem_v}")
    endforeach()
  endif()
  set(IDEM_PC_DESCRIPTION "${PROJECT_DESCRIPTION}")
  if(IDEM_DEB_SUMMARY_${name})
    string(APPEND IDEM_PC_DESCRIPTION ": ${IDEM_DEB_SUMMARY_${name}}")
  endif()
  foreach(dir LIBDIR INCLUDEDIR)
    if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
      set(IDEM_PC_${dir} "${CMAKE_INSTALL_${dir}}")
    else()
      set(IDEM_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
    endif()
  endforeach()
  # From <prefix>/<libdir>/pkgconfig back to <prefix>.
  file(RELATIVE_PATH IDEM_PC_UP /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
  string(REGEX REPLACE "/$" "" IDEM_PC_UP "${IDEM_PC_UP}")
  set(out ${PROJECT_BINARY_DIR}/pkgconfig/${IDEM_PC_MODULE}.pc)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/idem.pc.in ${out} @ONLY)
  install(FILES ${out} DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT ${component})
endfunction()

# idem_install_package_files(): every library's export file and .pc, and the
# CMake package's config and version files. Call after every library exists.
function(idem_install_package_files)
  get_property(libraries GLOBAL PROPERTY IDEM_LIBRARIES)
  set(cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/idem)
  foreach(name IN LISTS libraries)
    get_property(component GLOBAL PROPERTY IDEM_LIBRARY_${name}_COMPONENT)
    install(EXPORT idem-${name}-targets
      NAMESPACE idem::
      DESTINATION ${cmake_dir}
      COMPONENT ${component})
    idem_pkg_config(${name})
  endforeach()
  # idemConfig.cmake loads the export files present, in this order (each
  # library after those it links).
  list(REMOVE_ITEM libraries core)
  string(REPLACE ";" " " IDEM_CONFIG_PARTS "${libraries}")
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/idemConfig.cmake.in
    ${PROJECT_BINARY_DIR}/idemConfig.cmake
    INSTALL_DESTINATION ${cmake_dir})
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/idemConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
  install(FILES
    ${PROJECT_BINARY_DIR}/idemConfig.cmake
    ${PROJECT_BINARY_DIR}/idemConfigVersion.cmake
    ${PROJECT_SOURCE_DIR}/cmake/Findzstd.cmake
    DESTINATION ${cmake_dir}
    COMPONENT dev)
  if(IDEM_WITH_REDIS)
    install(FILES ${PROJECT_SOURCE_DIR}/cmake/Findhiredis.cmake
      DESTINATION ${cmake_dir}
      COMPONENT redis)
  endif()
endfunction()

# The project states no license yet, so the packages carry no
# usr/share/doc/<package>/copyright; the Maintainer is a placeholder a
# release sets.
set(IDEM_PACKAGE_MAINTAINER "idem maintainers <maintainers@idem.invalid>" CACHE STRING
  "The Maintainer field of the .deb packages")

# idem_cpack(): the .deb packages, one per install component (see the top of
# this file). Call last, after every install() rule (tools/idemctl's too).
function(idem_cpack)
  set(v "(= ${PROJECT_VERSION})")
  set(CPACK_GENERATOR DEB)
  set(CPACK_PACKAGE_NAME idem)
  set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
  set(CPACK_PACKAGE_VENDOR "idem")
  # CPack's default summary: CPackDeb then takes each package's synopsis
  # from the first line of its description instead of prepending this one.
  set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CMAKE_PROJECT_NAME} built using CMake")
  set(CPACK_PACKAGE_CONTACT "${IDEM_PACKAGE_MAINTAINER}")
  set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${IDEM_PACKAGE_MAINTAINER}")
  set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
  set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
  set(CPACK_DEB_COMPONENT_INSTALL ON)
  set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
  # Binaries without debug information: the packages are for users.
  set(CPACK_STRIP_FILES ON)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)

  # Descriptions: the synopsis, then paragraphs (CPackDeb indents them).
  string(CONCAT about
    "idem makes HTTP retries safe: a server that receives a request with an\n"
    "Idempotency-Key header runs its handler once and answers every retry with\n"
    "the first response (the IETF Idempotency-Key HTTP header draft).")
  set(static "A static library: a program needs this package to build only.")

  get_property(libraries GLOBAL PROPERTY IDEM_LIBRARIES)
  get_property(backends GLOBAL PROPERTY IDEM_BACKENDS)
  set(components)
  foreach(name IN LISTS libraries)
    get_property(component GLOBAL PROPERTY IDEM_LIBRARY_${name}_COMPONENT)
    if(component IN_LIST components)
      continue()  # core and memory share libidem-dev.
    endif()
    list(APPEND components ${component})
    string(TOUPPER ${component} C)
    if(component STREQUAL "dev")
      set(package libidem-dev)
      set(depends "${IDEM_DEB_DEPENDS_dev}")
    else()
      set(package libidem-${component}-dev)
      set(depends "libidem-dev ${v}")
      if(IDEM_DEB_DEPENDS_${component})
        string(APPEND depends ", ${IDEM_DEB_DEPENDS_${component}}")
      endif()
      foreach(c IN LISTS IDEM_DEB_IDEM_DEPENDS_${component})
        string(APPEND depends ", libidem-${c}-dev ${v}")
      endforeach()
    endif()
    if(component STREQUAL "stores")
      foreach(b IN LISTS backends)
        get_property(bc GLOBAL PROPERTY IDEM_LIBRARY_${b}_COMPONENT)
        if(NOT bc STREQUAL "dev")
          string(APPEND depends ", libidem-${bc}-dev ${v}")
        endif()
      endforeach()
    endif()
    set(CPACK_DEBIAN_${C}_PACKAGE_NAME ${package})
    set(CPACK_DEBIAN_${C}_PACKAGE_DEPENDS "${depends}")
    set(CPACK_DEBIAN_${C}_PACKAGE_SECTION libdevel)
    set(CPACK_COMPONENT_${C}_DESCRIPTION
      "C++ Idempotency-Key library: ${IDEM_DEB_SUMMARY_${component}}\n${about}\n\n${static}")
  endforeach()

  set(CPACK_DEBIAN_DEMO_PACKAGE_NAME idem-demo)
  set(CPACK_DEBIAN_DEMO_PACKAGE_SECTION net)
  set(CPACK_COMPONENT_DEMO_DESCRIPTION
    "demo HTTP server of the idem Idempotency-Key library\n${about}\n\nidem-demo serves protected routes over any idem store URI\n(RocksDB by default).")
  set(CPACK_DEBIAN_IDEMCTL_PACKAGE_NAME idemctl)
  set(CPACK_DEBIAN_IDEMCTL_PACKAGE_SECTION admin)
  set(CPACK_COMPONENT_IDEMCTL_DESCRIPTION
    "inspect, revoke and purge the records of idem Idempotency-Key stores\n${about}\n\nidemctl works on any idem store URI, for an operator who holds a\nclient's key and scope.")

  include(CPack)
endfunction()

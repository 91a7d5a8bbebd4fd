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
#                                 export file and .pc (what each needs:
#                                 idem_package_facts in its folder)
#   stores   libidem-stores-dev   idem::stores (OpenStore over every store
#                                 this build has, so it depends on them all)
#   testing  libidem-testing-dev  idem::testing, the store contract suite
#                                 (GoogleTest) for a store written elsewhere
#   asio     libidem-asio-dev     idem::asio, what the Asio adapters share
#   beast    libidem-beast-dev    the Boost.Beast adapter
#   restinio libidem-restinio-dev the RESTinio adapter
#   grpc     libidem-grpc-dev     the gRPC adapter
#   demo     idem-demo            the demo server
#   grpc_demo idem-grpc-demo      the gRPC demo server
#   idemctl  idemctl              the operator's tool (tools/idemctl installs
#                                 into this component when it is built)
# The libraries are static archives, so the -dev packages are all there is
# to a library (no runtime package); the programs get their shared
# library dependencies from dpkg-shlibdeps. The license (Apache-2.0):
# LICENSE as share/doc/idem/LICENSE in libidem-dev, and every package's
# usr/share/doc/<package>/copyright (cmake/copyright.in).

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
set(IDEM_PC_REQUIRES_asio "idem ${_idem_v}")  # Boost ships no .pc: headers only.
set(IDEM_PC_REQUIRES_beast "idem ${_idem_v}, idem-asio ${_idem_v}")
# RESTinio ships no .pc (headers only); it links fmt.
set(IDEM_PC_REQUIRES_restinio "idem ${_idem_v}, idem-asio ${_idem_v}, fmt")
# gRPC's and protobuf's own .pc files (Debian's libgrpc++-dev,
# libprotobuf-dev).
set(IDEM_PC_REQUIRES_grpc
  "idem ${_idem_v}, idem-asio ${_idem_v}, grpc++ >= 1.51, protobuf >= 3.21")

# The Debian packages a library's -dev package depends on (Debian 12 names;
# the minimum versions are the ones the top-level find_package calls ask
# for), besides libidem-dev itself.
set(IDEM_DEB_DEPENDS_dev
  "libssl-dev (>= 3), libexpected-dev, nlohmann-json3-dev (>= 3.10), liburiparser-dev (>= 0.9), libzstd-dev (>= 1.4), pkg-config")  # cmake/Findzstd.cmake
set(IDEM_DEB_DEPENDS_asio "libboost-dev (>= 1.74) | libboost1.74-dev")
set(IDEM_DEB_DEPENDS_beast "libboost-dev (>= 1.74) | libboost1.74-dev")
set(IDEM_DEB_DEPENDS_restinio "librestinio-dev, libfmt-dev")
# protobuf-compiler-grpc: grpc_cpp_plugin, which gRPC's CMake package
# names (find_package(gRPC) fails without it) and every service needs.
set(IDEM_DEB_DEPENDS_grpc
  "libgrpc++-dev (>= 1.51), libprotobuf-dev (>= 3.21), protobuf-compiler-grpc (>= 1.51), libboost-dev (>= 1.74) | libboost1.74-dev")
# The idem packages a component's libraries link besides libidem-dev.
set(IDEM_DEB_IDEM_DEPENDS_beast asio)
set(IDEM_DEB_IDEM_DEPENDS_restinio asio)
set(IDEM_DEB_IDEM_DEPENDS_grpc asio)

set(IDEM_DEB_SUMMARY_dev "core, memory store, CMake and pkg-config files")
set(IDEM_DEB_SUMMARY_stores "OpenStore over every store")
set(IDEM_DEB_SUMMARY_asio "the Asio adapters' shared layer")
set(IDEM_DEB_SUMMARY_beast "Boost.Beast adapter")
set(IDEM_DEB_SUMMARY_restinio "RESTinio adapter")
set(IDEM_DEB_SUMMARY_grpc "gRPC adapter (unary methods)")

# idem_package_facts(<library> [PC_REQUIRES <text>] [DEB_DEPENDS <text>]
#                    [SUMMARY <text>] [FIND_DEPENDENCY <arguments>...]
#                    [FIND_MODULES <file>...])
# What the packaging says of one library, stated in the library's own
# CMakeLists.txt (a store's folder holds all of it): what its pkg-config
# file requires besides idem, what its -dev package depends on besides
# libidem-dev (Debian 12 names), its package's summary, the
# find_dependency() idemConfig.cmake calls before loading its export file
# (idem-<library>-dependencies.cmake, installed with it), and the
# Find<package>.cmake modules that call needs (installed beside it).
# Call after the library exists (idem_add_library, idem_add_backend).
function(idem_package_facts name)
  cmake_parse_arguments(ARG "" "PC_REQUIRES;DEB_DEPENDS;SUMMARY"
    "FIND_DEPENDENCY;FIND_MODULES" ${ARGN})
  set(requires "idem ${_idem_v}")
  if(ARG_PC_REQUIRES)
    string(APPEND requires ", ${ARG_PC_REQUIRES}")
  endif()
  set_property(GLOBAL PROPERTY IDEM_FACT_PC_REQUIRES_${name} "${requires}")
  set_property(GLOBAL PROPERTY IDEM_FACT_DEB_DEPENDS_${name} "${ARG_DEB_DEPENDS}")
  set_property(GLOBAL PROPERTY IDEM_FACT_DEB_SUMMARY_${name} "${ARG_SUMMARY}")
  get_property(component GLOBAL PROPERTY IDEM_LIBRARY_${name}_COMPONENT)
  set(cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/idem)
  if(ARG_FIND_DEPENDENCY)
    list(JOIN ARG_FIND_DEPENDENCY " " call)
    set(out ${PROJECT_BINARY_DIR}/idem-${name}-dependencies.cmake)
    file(WRITE ${out} "# What idem::${name} links besides idem (generated).\n"
      "list(APPEND CMAKE_MODULE_PATH \"\${CMAKE_CURRENT_LIST_DIR}\")\n"
      "find_dependency(${call})\n")
    install(FILES ${out} DESTINATION ${cmake_dir} COMPONENT ${component})
  endif()
  foreach(module IN LISTS ARG_FIND_MODULES)
    install(FILES ${module} DESTINATION ${cmake_dir} COMPONENT ${component})
  endforeach()
endfunction()

# The facts idem_package_facts recorded, as the variables
# IDEM_PC_REQUIRES_<library>, IDEM_DEB_DEPENDS_<library> and
# IDEM_DEB_SUMMARY_<library> in the caller's scope.
macro(_idem_load_package_facts)
  get_property(_idem_libraries GLOBAL PROPERTY IDEM_LIBRARIES)
  foreach(_idem_lib IN LISTS _idem_libraries)
    foreach(_idem_fact PC_REQUIRES DEB_DEPENDS DEB_SUMMARY)
      get_property(_idem_set GLOBAL PROPERTY IDEM_FACT_${_idem_fact}_${_idem_lib} SET)
      if(_idem_set)
        get_property(IDEM_${_idem_fact}_${_idem_lib} GLOBAL PROPERTY IDEM_FACT_${_idem_fact}_${_idem_lib})
      endif()
    endforeach()
  endforeach()
endmacro()

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
  _idem_load_package_facts()
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
    ${PROJECT_SOURCE_DIR}/cmake/IdemFindPkgConfig.cmake
    DESTINATION ${cmake_dir}
    COMPONENT dev)
  # The license (Apache-2.0) with the headers: <prefix>/share/doc/idem/LICENSE.
  install(FILES ${PROJECT_SOURCE_DIR}/LICENSE
    DESTINATION ${CMAKE_INSTALL_DOCDIR}
    COMPONENT dev)
endfunction()

# The Maintainer is a placeholder a release sets.
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

  _idem_load_package_facts()
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
  set(CPACK_DEBIAN_GRPC_DEMO_PACKAGE_NAME idem-grpc-demo)
  set(CPACK_DEBIAN_GRPC_DEMO_PACKAGE_SECTION net)
  set(CPACK_COMPONENT_GRPC_DEMO_DESCRIPTION
    "demo gRPC server of the idem Idempotency-Key library\n${about}\n\nidem-grpc-demo serves an Orders service whose CreateOrder honours the\nidempotency-key metadata over any idem store URI (RocksDB by default).")
  set(CPACK_DEBIAN_IDEMCTL_PACKAGE_NAME idemctl)
  set(CPACK_DEBIAN_IDEMCTL_PACKAGE_SECTION admin)
  set(CPACK_COMPONENT_IDEMCTL_DESCRIPTION
    "inspect, revoke and purge the records of idem Idempotency-Key stores\n${about}\n\nidemctl works on any idem store URI, for an operator who holds a\nclient's key and scope.")

  # Every package's usr/share/doc/<package>/copyright (Debian's
  # machine-readable format), naming the license; for the packages only
  # (EXCLUDE_FROM_ALL: a plain `cmake --install` has LICENSE above). A
  # component without a package name set above gets CPack's default name.
  configure_file(${PROJECT_SOURCE_DIR}/cmake/copyright.in
    ${PROJECT_BINARY_DIR}/copyright @ONLY)
  get_cmake_property(all_components COMPONENTS)
  foreach(component IN LISTS all_components)
    string(TOUPPER ${component} C)
    set(package "${CPACK_DEBIAN_${C}_PACKAGE_NAME}")
    if(NOT package)
      string(TOLOWER "${CPACK_PACKAGE_NAME}-${component}" package)
    endif()
    install(FILES ${PROJECT_BINARY_DIR}/copyright
      DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${package}
      COMPONENT ${component}
      EXCLUDE_FROM_ALL)
  endforeach()

  include(CPack)
endfunction()

# idem_find_pkg_config(<package> <pkg-config module> <imported target>): the
# body of a Find module for a library that ships a pkg-config file but no
# CMake package (Findzstd.cmake, Findhiredis.cmake): finds <module> through
# pkg-config and, when found, defines <imported target>. Sets
# <package>_FOUND and <package>_VERSION as find_package_handle_standard_args
# does, honouring the version and REQUIRED of the find_package call. A macro,
# so that those variables reach the caller. Installed beside the Find
# modules that include it (component dev), for idem's consumers.
macro(idem_find_pkg_config package module target)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(IDEM_PC_${package} QUIET IMPORTED_TARGET ${module})
  endif()
  set(${package}_VERSION ${IDEM_PC_${package}_VERSION})
  include(FindPackageHandleStandardArgs)
  find_package_handle_standard_args(${package}
    REQUIRED_VARS IDEM_PC_${package}_LINK_LIBRARIES
    VERSION_VAR ${package}_VERSION)
  if(${package}_FOUND AND NOT TARGET ${target})
    add_library(${target} INTERFACE IMPORTED)
    target_link_libraries(${target} INTERFACE PkgConfig::IDEM_PC_${package})
  endif()
endmacro()

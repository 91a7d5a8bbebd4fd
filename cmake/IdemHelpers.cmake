# idem_add_library(<name> SOURCES ... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...]
#                  [COMPONENT <component>])
# A library target idem_<name>, exported and installed as idem::<name>, with
# its public headers in ${CMAKE_CURRENT_SOURCE_DIR}/include. Its library,
# headers and export file (idem-<name>-targets.cmake, see
# cmake/IdemPackaging.cmake) go to install COMPONENT (default: <name>), one
# .deb package each (cmake/IdemPackaging.cmake names them).
function(idem_add_library name)
  cmake_parse_arguments(ARG "" "COMPONENT" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  if(NOT ARG_COMPONENT)
    set(ARG_COMPONENT ${name})
  endif()
  add_library(idem_${name} ${ARG_SOURCES})
  add_library(idem::${name} ALIAS idem_${name})
  set_target_properties(idem_${name} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME idem_${name})
  # A usage requirement, so that a consumer of the installed package
  # compiles idem's headers as C++20 too.
  target_compile_features(idem_${name} PUBLIC cxx_std_20)
  target_include_directories(idem_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(idem_${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  # One export set per library, so that a package holds the export files of
  # its own libraries only and idemConfig.cmake loads those installed.
  install(TARGETS idem_${name} EXPORT idem-${name}-targets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT ${ARG_COMPONENT}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT ${ARG_COMPONENT})
  # A stripped install (CPack's CPACK_STRIP_FILES, `cmake --install
  # --strip`) strips executables and shared libraries only: a static
  # library kept all its debug information (libidem_core.a: 42 MB, 1.8 MB
  # without). Strip it as Debian's dh_strip does a static library: debug
  # sections only, every symbol a link needs stays.
  install(CODE "
    if(CMAKE_INSTALL_DO_STRIP)
      execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug
        \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:idem_${name}>\"
        RESULT_VARIABLE stripped)
      if(NOT stripped EQUAL 0)
        message(FATAL_ERROR \"cannot strip $<TARGET_FILE_NAME:idem_${name}>\")
      endif()
    endif()" COMPONENT ${ARG_COMPONENT})
  # *.in: templates of generated headers, installed as generated.
  install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    COMPONENT ${ARG_COMPONENT} PATTERN "*.in" EXCLUDE)
  set_property(GLOBAL APPEND PROPERTY IDEM_LIBRARIES ${name})
  set_property(GLOBAL PROPERTY IDEM_LIBRARY_${name}_COMPONENT ${ARG_COMPONENT})
endfunction()

# idem_add_backend(<name> SOURCES ... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...]
#                  [COMPONENT <component>] [DESCRIPTOR <function>]
#                  [BENCH_SOURCES ... [BENCH_LIBS ...]])
# Used from backends/<name>/CMakeLists.txt: builds idem::<name> on top of
# idem::core and registers it with idem::stores: the registry
# (store_registry.h) calls `const idem::StoreDescriptor& <function>()`,
# which one of SOURCES defines (default: <Name>StoreDescriptor, the name
# capitalized, e.g. SqliteStoreDescriptor). BENCH_SOURCES: the store's raw
# engine write for idem-bench (benchmarks/raw_ops.h), compiled into the
# benchmarks only, with BENCH_LIBS and the store's private headers (src/)
# on the include path; one of them defines
# `const idem::bench::RawEngine& <Name>RawEngine()`.
function(idem_add_backend name)
  cmake_parse_arguments(ARG "" "COMPONENT;DESCRIPTOR"
    "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS;BENCH_SOURCES;BENCH_LIBS" ${ARGN})
  if(NOT ARG_COMPONENT)
    set(ARG_COMPONENT ${name})
  endif()
  if(NOT ARG_DESCRIPTOR)
    string(SUBSTRING ${name} 0 1 first)
    string(SUBSTRING ${name} 1 -1 rest)
    string(TOUPPER ${first} first)
    set(ARG_DESCRIPTOR ${first}${rest}StoreDescriptor)
  endif()
  set_property(GLOBAL PROPERTY IDEM_BACKEND_${name}_DESCRIPTOR ${ARG_DESCRIPTOR})
  if(ARG_BENCH_SOURCES)
    list(TRANSFORM ARG_BENCH_SOURCES PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
    set_property(GLOBAL PROPERTY IDEM_BACKEND_${name}_BENCH_SOURCES ${ARG_BENCH_SOURCES})
    set_property(GLOBAL PROPERTY IDEM_BACKEND_${name}_BENCH_LIBS ${ARG_BENCH_LIBS})
  endif()
  idem_add_library(${name} SOURCES ${ARG_SOURCES}
    PUBLIC_DEPS idem::core ${ARG_PUBLIC_DEPS}
    PRIVATE_DEPS ${ARG_PRIVATE_DEPS}
    COMPONENT ${ARG_COMPONENT})
  # core/internal/include (idem::core_internal): build-only, so absent from
  # the exported targets and the installed headers.
  target_link_libraries(idem_${name} PRIVATE $<BUILD_INTERFACE:idem::core_internal>)
  set_property(GLOBAL APPEND PROPERTY IDEM_BACKENDS ${name})
endfunction()

# A test's compile definition NAME="<path>" naming `what`, a target (its
# built file; the test then depends on it) or a file of the checkout, by
# its path relative to the build tree's root, which the test resolves with
# tests/support/built_path.h. Relative, so that the compile command is the
# same in every checkout and ccache serves a fresh clone (built_path.h says
# what absolute paths cost).
function(idem_test_path target name what)
  if(TARGET ${what})
    set(path "$<PATH:RELATIVE_PATH,$<TARGET_FILE:${what}>,${PROJECT_BINARY_DIR}>")
    add_dependencies(${target} ${what})
  else()
    file(RELATIVE_PATH path ${PROJECT_BINARY_DIR} ${what})
  endif()
  target_compile_definitions(${target} PRIVATE ${name}="${path}")
endfunction()

# idem_add_test(<name> SOURCES ... LIBS ... [LABEL <label>] [TIMEOUT <s>]
#               [RUN_SERIAL] [RUNS_DEMO]): one GoogleTest binary whose
# cases are registered with CTest in groups of one suite
# (idem_add_test_groups, cmake/IdemTestGroups.cmake), the only way a test
# binary is registered; the crash tests (LABEL crash) one case each.
# LABEL: the store a test is about, so that `ctest -L sqlite` runs that
# store's own tests and its contract suite (one label). TIMEOUT per case,
# default 300 s. RUN_SERIAL: the cases run alone (they start and stop
# servers of their own). RUNS_DEMO: the binary starts the idem-demo
# executable, whose path it gets as IDEM_DEMO_PATH (idem_test_path).
function(idem_add_test name)
  cmake_parse_arguments(ARG "RUN_SERIAL;RUNS_DEMO" "LABEL;TIMEOUT" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gmock GTest::gtest_main)
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  set(properties TIMEOUT ${ARG_TIMEOUT})
  if(ARG_LABEL)
    list(APPEND properties LABELS ${ARG_LABEL})
  endif()
  if(ARG_RUN_SERIAL)
    list(APPEND properties RUN_SERIAL TRUE)
  endif()
  if(ARG_RUNS_DEMO)
    idem_test_path(${name} IDEM_DEMO_PATH idem-demo)
  endif()
  set(per_case)
  if(ARG_LABEL STREQUAL "crash")
    set(per_case PER_CASE)
  endif()
  idem_add_test_groups(${name} ${per_case} PROPERTIES ${properties})
endfunction()

# idem_option(<var> <doc> [PACKAGE <find_package arguments>...]): a part
# built when <var> (a cache entry) says so: AUTO (the default) builds it when
# find_package(<arguments> QUIET) finds its package, ON requires the package,
# OFF skips it. Afterwards <var> is ON or OFF in the caller's scope (a plain
# variable over the cache entry, which keeps the user's choice for the next
# configure), so `if(<var>)` means "built". Without PACKAGE, AUTO is ON.
# Each call adds a line to the configure summary (idem_print_summary).
function(idem_option var doc)
  cmake_parse_arguments(ARG "" "" "PACKAGE" ${ARGN})
  set(${var} AUTO CACHE STRING "${doc}: AUTO (when found) | ON | OFF")
  set_property(CACHE ${var} PROPERTY STRINGS AUTO ON OFF)
  set(choice ${${var}})
  string(TOUPPER "${choice}" choice_upper)
  string(REGEX REPLACE "^IDEM_WITH_" "" part ${var})
  string(TOLOWER ${part} part)
  if(NOT choice_upper STREQUAL "AUTO" AND NOT choice)
    set(built OFF)
    set(why "${var}=${choice}")
  elseif(NOT ARG_PACKAGE)
    set(built ON)
    set(why "${var}=${choice}, needs no package")
  else()
    list(GET ARG_PACKAGE 0 package)
    if(choice_upper STREQUAL "AUTO")
      find_package(${ARG_PACKAGE} QUIET)
    else()
      find_package(${ARG_PACKAGE} REQUIRED)
    endif()
    if(${package}_FOUND)
      set(built ON)
      set(version "${${package}_VERSION}")
      if(NOT version)
        set(version "${${package}_VERSION_STRING}")
      endif()
      set(why "${var}=${choice}, ${package} ${version} found")
    else()
      set(built OFF)
      set(why "${var}=${choice}, ${package} not found")
    endif()
  endif()
  if(built)
    idem_summary("${part}: built (${why})")
  else()
    idem_summary("${part}: skipped (${why})")
  endif()
  set(${var} ${built} PARENT_SCOPE)
endfunction()

# idem_add_enabled_subdirectories(): add_subdirectory(<name>) for every
# folder <name> of the current source directory whose IDEM_WITH_<NAME> is
# on (backends/ and tests/backends/: a new store needs no line there).
function(idem_add_enabled_subdirectories)
  file(GLOB children RELATIVE ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/*/CMakeLists.txt)
  foreach(child IN LISTS children)
    get_filename_component(name ${child} DIRECTORY)
    string(TOUPPER ${name} upper)
    if(IDEM_WITH_${upper})
      add_subdirectory(${name})
    endif()
  endforeach()
endfunction()

# idem_add_suite(<dir> [WHEN <condition>...]): add_subdirectory(<dir>) of
# tests when the if() condition holds (all of it when there is none), with a
# summary line saying which.
function(idem_add_suite dir)
  cmake_parse_arguments(ARG "" "" "WHEN" ${ARGN})
  set(wanted TRUE)
  if(ARG_WHEN AND NOT (${ARG_WHEN}))
    set(wanted FALSE)
  endif()
  if(wanted)
    add_subdirectory(${dir})
    idem_summary("tests/${dir}: built")
  else()
    string(REPLACE ";" " " condition "${ARG_WHEN}")
    string(REPLACE "( " "(" condition "${condition}")
    string(REPLACE " )" ")" condition "${condition}")
    idem_summary("tests/${dir}: skipped (needs ${condition})")
  endif()
endfunction()

# idem_summary(<line>): one line of the summary idem_print_summary() prints
# at the end of the configure.
function(idem_summary line)
  set_property(GLOBAL APPEND PROPERTY IDEM_SUMMARY "${line}")
endfunction()

function(idem_print_summary)
  get_property(lines GLOBAL PROPERTY IDEM_SUMMARY)
  message(STATUS "idem ${PROJECT_VERSION} configuration:")
  foreach(line IN LISTS lines)
    message(STATUS "  ${line}")
  endforeach()
endfunction()

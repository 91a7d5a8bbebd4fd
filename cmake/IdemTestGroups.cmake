# idem_add_test_groups(<target> [TEST_FILTER <gtest filter>] [NAME_SUFFIX <s>]
#                      [PER_CASE] [PROPERTIES <name> <value> ...])
# Registers a GoogleTest binary's cases with CTest in groups: one CTest test
# per group of at most IDEM_TEST_GROUP_SIZE cases of one test suite, run as
# one process (`--gtest_filter=` naming exactly those cases), named
# "<binary without idem_ and _tests>: <suite>.* [<group>/<groups>]".
#
# Why not one process per case (gtest_discover_tests): the sanitizer builds'
# test binaries are 100-300 MB, and starting one under ASan costs about
# 0.15 s of CPU before its first case runs (mapping the shadow memory,
# relocating, the leak check at exit). With about 1,700 cases that was the
# larger part of the sanitizer stages' ctest time (the whole core suite: 24 s
# as one process, 190 s of ctest test time as 452 processes). Groups of one
# suite keep a failure's name close to its case and let ctest spread the
# groups over the cores.
#
# PER_CASE: one CTest test per case as before (for the crash tests, which
# mostly wait and which scripts/test.sh runs many at a time).
# TEST_FILTER: only the cases this GoogleTest filter selects (one binary
# registered several times under different labels); NAME_SUFFIX then keeps
# the groups' names apart. PROPERTIES: set on every group (TIMEOUT is per
# group: one case's bound times the group's cases, at least 300 s).
#
# The cases are listed after every build of the target (POST_BUILD, like
# gtest_discover_tests), so a new case needs no re-configure.
set(IDEM_TEST_GROUP_SIZE 20 CACHE STRING
  "Most GoogleTest cases one CTest test runs in one process")
set(_idem_test_groups_script ${CMAKE_CURRENT_LIST_DIR}/IdemTestGroupsList.cmake)

function(idem_add_test_groups target)
  cmake_parse_arguments(ARG "PER_CASE" "TEST_FILTER;NAME_SUFFIX" "PROPERTIES" ${ARGN})
  if(ARG_PER_CASE)
    set(filter_args)
    if(ARG_TEST_FILTER)
      set(filter_args TEST_FILTER "${ARG_TEST_FILTER}")
    endif()
    gtest_discover_tests(${target} ${filter_args} DISCOVERY_TIMEOUT 60
      PROPERTIES ${ARG_PROPERTIES})
    return()
  endif()
  # A target may be registered several times (one per filter).
  get_property(count TARGET ${target} PROPERTY IDEM_TEST_GROUP_COUNT)
  if(NOT count)
    set(count 0)
  endif()
  math(EXPR count "${count} + 1")
  set_property(TARGET ${target} PROPERTY IDEM_TEST_GROUP_COUNT ${count})
  set(prefix ${CMAKE_CURRENT_BINARY_DIR}/${target}_groups_${count})
  # The binary names the group: suites of one name run in several binaries
  # (the contract suite in each store's), "contract_memory: Suite.*".
  string(REGEX REPLACE "^idem_|_tests$" "" name_prefix ${target})
  # Lists travel through the command line with "|" for ";".
  string(REPLACE ";" "|" properties "${ARG_PROPERTIES}")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND}
      -D "EXECUTABLE=$<TARGET_FILE:${target}>"
      -D "TEST_FILTER=${ARG_TEST_FILTER}"
      -D "NAME_PREFIX=${name_prefix}"
      -D "NAME_SUFFIX=${ARG_NAME_SUFFIX}"
      -D "GROUP_SIZE=${IDEM_TEST_GROUP_SIZE}"
      -D "PROPERTIES=${properties}"
      -D "WORKING_DIRECTORY=${CMAKE_CURRENT_BINARY_DIR}"
      -D "OUTPUT=${prefix}_tests.cmake"
      -P ${_idem_test_groups_script}
    BYPRODUCTS ${prefix}_tests.cmake
    VERBATIM)
  # What ctest reads: the list once built, else one test saying so.
  file(WRITE ${prefix}_include.cmake
    "if(EXISTS \"${prefix}_tests.cmake\")\n"
    "  include(\"${prefix}_tests.cmake\")\n"
    "else()\n"
    "  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${prefix}_include.cmake)
endfunction()

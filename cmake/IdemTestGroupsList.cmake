# Script mode (cmake -P), run after each build of a test binary by
# idem_add_test_groups (cmake/IdemTestGroups.cmake): lists the binary's
# cases and writes OUTPUT, the CTest tests that run them in groups.
# Inputs: EXECUTABLE, TEST_FILTER, NAME_PREFIX, NAME_SUFFIX, GROUP_SIZE, PROPERTIES
# ("|" for ";"), WORKING_DIRECTORY, OUTPUT.
set(list_args --gtest_list_tests)
if(TEST_FILTER)
  list(APPEND list_args "--gtest_filter=${TEST_FILTER}")
endif()
execute_process(COMMAND "${EXECUTABLE}" ${list_args}
  WORKING_DIRECTORY "${WORKING_DIRECTORY}"
  OUTPUT_VARIABLE listing ERROR_VARIABLE errors RESULT_VARIABLE result
  TIMEOUT 60)
if(NOT result EQUAL 0)
  message(FATAL_ERROR
    "${EXECUTABLE} --gtest_list_tests failed (${result}):\n${listing}${errors}")
endif()

# One list element per line; the listing's parameter comments ("# GetParam()
# = ...") may hold anything, so ";" is taken out before splitting.
string(REPLACE ";" "," listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")

string(REPLACE "|" ";" properties "${PROPERTIES}")
set(case_timeout 300)
list(FIND properties TIMEOUT timeout_at)
if(timeout_at GREATER -1)
  math(EXPR value_at "${timeout_at} + 1")
  list(GET properties ${value_at} case_timeout)
  list(REMOVE_AT properties ${value_at} ${timeout_at})
endif()

set(content "")
set(suite "")
set(cases "")
# Appends the CTest tests of the suite read so far, GROUP_SIZE cases each.
macro(flush_suite)
  list(LENGTH cases total)
  if(total GREATER 0)
    math(EXPR groups "(${total} + ${GROUP_SIZE} - 1) / ${GROUP_SIZE}")
    set(first 0)
    foreach(group RANGE 1 ${groups})
      math(EXPR last "${first} + ${GROUP_SIZE} - 1")
      if(last GREATER_EQUAL total)
        math(EXPR last "${total} - 1")
      endif()
      set(filter "")
      set(in_group 0)
      foreach(at RANGE ${first} ${last})
        list(GET cases ${at} case)
        string(APPEND filter "${suite}.${case}:")
        math(EXPR in_group "${in_group} + 1")
      endforeach()
      string(REGEX REPLACE ":$" "" filter "${filter}")
      set(name "${NAME_PREFIX}: ${suite}.*")
      if(groups GREATER 1)
        string(APPEND name " [${group}/${groups}]")
      endif()
      if(NAME_SUFFIX)
        string(APPEND name " ${NAME_SUFFIX}")
      endif()
      math(EXPR timeout "${case_timeout} * ${in_group}")
      if(timeout LESS 300)
        set(timeout 300)
      endif()
      string(APPEND content
        "add_test([==[${name}]==] [==[${EXECUTABLE}]==] [==[--gtest_filter=${filter}]==])\n"
        "set_tests_properties([==[${name}]==] PROPERTIES WORKING_DIRECTORY [==[${WORKING_DIRECTORY}]==] TIMEOUT ${timeout}")
      foreach(property IN LISTS properties)
        string(APPEND content " [==[${property}]==]")
      endforeach()
      string(APPEND content ")\n")
      math(EXPR first "${last} + 1")
    endforeach()
  endif()
  set(cases "")
endmacro()

foreach(line IN LISTS lines)
  # Drop the parameter comment of typed and value-parameterized tests.
  string(REGEX REPLACE "  +#.*$" "" line "${line}")
  if(line MATCHES "^  ([^ ]+)$")
    set(case "${CMAKE_MATCH_1}")
    if(NOT case MATCHES "^DISABLED_" AND NOT suite MATCHES "(^|/)DISABLED_")
      list(APPEND cases "${case}")
    endif()
  elseif(line MATCHES "^([^ ]+)\\.$")
    set(next_suite "${CMAKE_MATCH_1}")  # flush_suite matches regexes too
    flush_suite()
    set(suite "${next_suite}")
  endif()
endforeach()
flush_suite()

file(WRITE "${OUTPUT}" "${content}")

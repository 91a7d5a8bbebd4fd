# idem_add_library(<name> SOURCES ... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...])
# A library target idem_<name>, exported and installed as idem::<name>, with
# its public headers in ${CMAKE_CURRENT_SOURCE_DIR}/include.
function(idem_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(idem_${name} ${ARG_SOURCES})
  add_library(idem::${name} ALIAS idem_${name})
  set_target_properties(idem_${name} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME idem_${name})
  target_include_directories(idem_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(idem_${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  install(TARGETS idem_${name} EXPORT idemTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endfunction()

# idem_add_backend(<name> SOURCES ... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...])
# Used from backends/<name>/CMakeLists.txt: builds idem::<name> on top of
# idem::core and registers it with idem::stores (OpenStore), which is built
# with IDEM_HAVE_<NAME> defined for every enabled backend.
function(idem_add_backend name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  idem_add_library(${name} SOURCES ${ARG_SOURCES}
    PUBLIC_DEPS idem::core ${ARG_PUBLIC_DEPS}
    PRIVATE_DEPS ${ARG_PRIVATE_DEPS})
  string(TOUPPER ${name} upper)
  set_property(GLOBAL APPEND PROPERTY IDEM_BACKENDS ${name})
  set_property(GLOBAL APPEND PROPERTY IDEM_BACKEND_DEFINES IDEM_HAVE_${upper}=1)
endfunction()

# idem_add_test(<name> SOURCES ... LIBS ... [LABEL <label>]): one GoogleTest
# binary whose cases are registered with CTest one by one, with LABEL (the
# store a test is about, so that `ctest -L sqlite` runs that store's own
# tests and its contract suite). One label: gtest_discover_tests passes
# each property a single value.
function(idem_add_test name)
  cmake_parse_arguments(ARG "" "LABEL" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gmock GTest::gtest_main)
  set(properties TIMEOUT 300)
  if(ARG_LABEL)
    list(APPEND properties LABELS ${ARG_LABEL})
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES ${properties})
endfunction()

# The C++ code protoc generates from .proto files, for the gRPC adapter's
# own record format, its tests and the gRPC demo. Needs
# find_package(Protobuf) (protobuf::protoc, protobuf::libprotobuf) and, with
# GRPC, find_package(gRPC CONFIG) (gRPC::grpc_cpp_plugin, gRPC::grpc++); the
# root CMakeLists.txt finds both when IDEM_WITH_GRPC is on.
#
# idem_add_proto_library(<target> PROTOS <file.proto>... [GRPC]
#                        [IMPORT_DIRS <dir>...])
# A static library <target> made of the generated code, e.g.
#   idem_add_proto_library(orders_proto PROTOS orders.proto GRPC)
#   target_link_libraries(my-server PRIVATE orders_proto idem::grpc)
# and #include "orders.pb.h" / "orders.grpc.pb.h".
#
# idem_proto_generate(<target> PROTOS <file.proto>... [GRPC]
#                     [IMPORT_DIRS <dir>...])
# The same code compiled into an existing target (its private sources and
# include path), for a library that must not export a second target.
#
# Both generate <name>.pb.h/.pb.cc for the messages and, with GRPC,
# <name>.grpc.pb.h/.grpc.pb.cc for the services (grpc_cpp_plugin), with
# <name> the .proto's path relative to its import directory, in
# ${CMAKE_CURRENT_BINARY_DIR}/<target>_proto (on the include path: public
# for a library made here). IMPORT_DIRS: where protoc looks for the .proto
# files and their imports (--proto_path). Default: the directory of each
# .proto. The code is regenerated when a .proto, protoc or the plugin
# changes.
function(idem_add_proto_library target)
  add_library(${target} STATIC)
  idem_proto_generate(${target} ${ARGN} _PUBLIC)
endfunction()

function(idem_proto_generate target)
  cmake_parse_arguments(ARG "GRPC;_PUBLIC" "" "PROTOS;IMPORT_DIRS" ${ARGN})
  if(NOT ARG_PROTOS)
    message(FATAL_ERROR "idem_add_proto_library(${target}): no PROTOS")
  endif()
  if(NOT TARGET protobuf::protoc OR NOT TARGET protobuf::libprotobuf)
    message(FATAL_ERROR "idem_add_proto_library(${target}): needs "
      "find_package(Protobuf) (protobuf::protoc, protobuf::libprotobuf)")
  endif()
  if(ARG_GRPC AND NOT TARGET gRPC::grpc_cpp_plugin)
    message(FATAL_ERROR "idem_add_proto_library(${target}): GRPC needs "
      "find_package(gRPC CONFIG) (gRPC::grpc_cpp_plugin)")
  endif()
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${target}_proto)
  file(MAKE_DIRECTORY ${out})
  set(sources)
  set(headers)
  foreach(proto IN LISTS ARG_PROTOS)
    get_filename_component(proto ${proto} ABSOLUTE)
    get_filename_component(proto_dir ${proto} DIRECTORY)
    set(import_dirs ${ARG_IMPORT_DIRS})
    if(NOT import_dirs)
      set(import_dirs ${proto_dir})
    endif()
    # The path protoc names the outputs after: relative to the first import
    # directory that holds the file.
    set(relative)
    foreach(dir IN LISTS import_dirs)
      get_filename_component(dir ${dir} ABSOLUTE)
      file(RELATIVE_PATH candidate ${dir} ${proto})
      if(NOT candidate MATCHES "^\\.\\./")
        set(relative ${candidate})
        break()
      endif()
    endforeach()
    if(NOT relative)
      message(FATAL_ERROR "idem_add_proto_library(${target}): ${proto} is "
        "not under any IMPORT_DIRS (${import_dirs})")
    endif()
    string(REGEX REPLACE "\\.proto$" "" stem ${relative})
    set(outputs ${out}/${stem}.pb.cc ${out}/${stem}.pb.h)
    set(args --cpp_out=${out})
    if(ARG_GRPC)
      list(APPEND outputs ${out}/${stem}.grpc.pb.cc ${out}/${stem}.grpc.pb.h)
      list(APPEND args --grpc_out=${out}
        --plugin=protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin>)
    endif()
    set(path_args)
    foreach(dir IN LISTS import_dirs)
      get_filename_component(dir ${dir} ABSOLUTE)
      list(APPEND path_args --proto_path=${dir})
    endforeach()
    set(depends ${proto} protobuf::protoc)
    if(ARG_GRPC)
      list(APPEND depends gRPC::grpc_cpp_plugin)
    endif()
    add_custom_command(
      OUTPUT ${outputs}
      COMMAND protobuf::protoc ${path_args} ${args} ${proto}
      DEPENDS ${depends}
      COMMENT "protoc ${relative} (${target})"
      VERBATIM)
    list(FILTER outputs INCLUDE REGEX "\\.cc$")
    list(APPEND sources ${outputs})
  endforeach()
  target_sources(${target} PRIVATE ${sources})
  # Generated code: not ours to warn about.
  set_source_files_properties(${sources} PROPERTIES COMPILE_OPTIONS
    $<$<CXX_COMPILER_ID:GNU,Clang>:-w>)
  set(libraries protobuf::libprotobuf)
  if(ARG_GRPC)
    list(APPEND libraries gRPC::grpc++)
  endif()
  if(ARG__PUBLIC)
    target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${out}>)
    target_link_libraries(${target} PUBLIC ${libraries})
  else()
    target_include_directories(${target} PRIVATE ${out})
    target_link_libraries(${target} PRIVATE ${libraries})
  endif()
endfunction()

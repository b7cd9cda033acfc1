# hourglass_proto_library(NAME IMPORT_DIR DIR PROTOS a.proto... [GRPC])
#
# A static library NAME compiled from PROTOS, which are paths relative to
# DIR, the protoc import root. Generated headers are included by the same
# relative path ("hourglass/v1/broker.pb.h"); the target's property
# HOURGLASS_PROTO_GEN_DIR names the directory they are generated in. GRPC adds the gRPC service
# stubs. (CMake 3.25's protobuf_generate derives output paths from the
# source directory, which breaks for import roots elsewhere.)
function(hourglass_proto_library name)
  cmake_parse_arguments(ARG "GRPC" "IMPORT_DIR" "PROTOS" ${ARGN})
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${name}_gen)
  file(MAKE_DIRECTORY ${out})
  set(srcs)
  set(inputs)
  foreach(proto ${ARG_PROTOS})
    string(REGEX REPLACE "\\.proto$" "" base ${proto})
    list(APPEND srcs ${out}/${base}.pb.cc ${out}/${base}.pb.h)
    if(ARG_GRPC)
      list(APPEND srcs ${out}/${base}.grpc.pb.cc ${out}/${base}.grpc.pb.h)
    endif()
    list(APPEND inputs ${ARG_IMPORT_DIR}/${proto})
  endforeach()
  set(grpc_args)
  if(ARG_GRPC)
    set(grpc_args --grpc_out=${out}
        --plugin=protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin>)
  endif()
  add_custom_command(
    OUTPUT ${srcs}
    COMMAND protobuf::protoc --cpp_out=${out} ${grpc_args}
            -I ${ARG_IMPORT_DIR} ${ARG_PROTOS}
    WORKING_DIRECTORY ${ARG_IMPORT_DIR}
    DEPENDS ${inputs} protobuf::protoc
    COMMENT "Generating C++ from ${ARG_PROTOS}")
  add_library(${name} ${srcs})
  # In the build tree only: an installed library says where its headers go
  # (cmake/HourglassInstall.cmake).
  target_include_directories(${name} PUBLIC $<BUILD_INTERFACE:${out}>)
  set_target_properties(${name} PROPERTIES HOURGLASS_PROTO_GEN_DIR ${out})
  target_compile_features(${name} PUBLIC cxx_std_20)
  target_link_libraries(${name} PUBLIC protobuf::libprotobuf)
  if(ARG_GRPC)
    target_link_libraries(${name} PUBLIC gRPC::grpc++)
  endif()
endfunction()

# cmake -DAPI=<repo>/api/hourglass/v1 -DCOPY=<repo>/clients/node/proto/hourglass/v1 -P check_protos.cmake
#
# The Node package ships copies of the API's .proto files (it loads them at
# run time): they must be the same files, byte for byte. After a change to
# api/hourglass/v1, copy them again:
#   cp api/hourglass/v1/*.proto clients/node/proto/hourglass/v1/
file(GLOB api_files RELATIVE ${API} ${API}/*.proto)
file(GLOB copy_files RELATIVE ${COPY} ${COPY}/*.proto)
list(SORT api_files)
list(SORT copy_files)
if(NOT api_files STREQUAL copy_files)
  message(FATAL_ERROR "clients/node/proto/hourglass/v1 holds [${copy_files}] but "
    "api/hourglass/v1 holds [${api_files}]: cp api/hourglass/v1/*.proto clients/node/proto/hourglass/v1/")
endif()
foreach(name IN LISTS api_files)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${API}/${name} ${COPY}/${name}
    RESULT_VARIABLE differ)
  if(differ)
    message(FATAL_ERROR "clients/node/proto/hourglass/v1/${name} differs from api/hourglass/v1/${name}: "
      "cp api/hourglass/v1/*.proto clients/node/proto/hourglass/v1/")
  endif()
endforeach()
list(LENGTH api_files count)
message(STATUS "the Node package's ${count} .proto files match api/hourglass/v1")

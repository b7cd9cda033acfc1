# What `cmake --install` puts in place, so that another project can
#
#   find_package(Hourglass 0.1 REQUIRED)
#   target_link_libraries(app PRIVATE Hourglass::client)
#
# (examples/ is such a project):
#   bin/                          hourglassd, hourglass, hourglass-bench
#                                 (their own CMakeLists.txt install them)
#   include/hourglass/client/     the client library's public headers
#   include/hourglass/v1/         the generated messages and stubs of
#                                 api/hourglass/v1/*.proto
#   lib/                          libhourglass_client.a, libhourglass_api_proto.a
#   lib/cmake/Hourglass/          HourglassConfig.cmake, its version file and
#                                 the exported targets Hourglass::client and
#                                 Hourglass::api_proto
# The libraries are static; HourglassConfig.cmake finds what they link
# (gRPC, Protobuf, abseil: Debian's packages) with find_dependency.
include(CMakePackageConfigHelpers)

set(HOURGLASS_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Hourglass)

# The generated code: installed headers are found from include/.
set_target_properties(hourglass_api_proto PROPERTIES EXPORT_NAME api_proto)
target_include_directories(hourglass_api_proto
  INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
get_target_property(api_proto_gen hourglass_api_proto HOURGLASS_PROTO_GEN_DIR)
install(DIRECTORY ${api_proto_gen}/hourglass/v1
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/hourglass
  FILES_MATCHING PATTERN "*.h")

install(TARGETS hourglass_client hourglass_api_proto
  EXPORT HourglassTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The public headers only: client/internal/ stays in the tree.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/client/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/hourglass/client
  FILES_MATCHING PATTERN "*.h"
  PATTERN internal EXCLUDE)

install(EXPORT HourglassTargets
  NAMESPACE Hourglass::
  DESTINATION ${HOURGLASS_CMAKE_DIR})
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/HourglassConfig.cmake.in
  ${PROJECT_BINARY_DIR}/HourglassConfig.cmake
  INSTALL_DESTINATION ${HOURGLASS_CMAKE_DIR})
# 0.x: a minor version may change the API.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/HourglassConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/HourglassConfig.cmake
  ${PROJECT_BINARY_DIR}/HourglassConfigVersion.cmake
  DESTINATION ${HOURGLASS_CMAKE_DIR})

# What `cmake --install` puts in place: the programs, what runs hourglassd
# as a systemd service, the documentation, and what another project needs to
#
#   find_package(Hourglass 0.1 REQUIRED)
#   target_link_libraries(app PRIVATE Hourglass::client)
#
# (examples/ is such a project):
#   bin/                          hourglassd, hourglass, hourglass-bench
#                                 (their own CMakeLists.txt install them)
#   share/bash-completion/        completions/hourglass, the CLI's bash
#                                 completion, printed at build time by the
#                                 CLI just built (`hourglass completion bash`)
#   lib/systemd/system/           hourglassd.service, naming the paths of
#                                 this prefix (HOURGLASS_SYSTEMD_UNIT_DIR)
#   lib/sysusers.d/               hourglass.conf, the user it runs as
#                                 (HOURGLASS_SYSUSERS_DIR)
#   /etc/hourglass/               hourglassd.flags, unless one is there; for
#                                 prefixes other than /, /usr and /usr/local
#                                 see cmake/HourglassInstallService.cmake
#   share/doc/hourglass/          README.md, ARCHITECTURE.md, BENCHMARKS.md,
#                                 SECURITY.md, CHANGELOG.md, LICENSE, the Markdown pages and images
#                                 of docs/ and deploy/ (its README, the
#                                 flag file with the defaults, the alerting
#                                 rules and the Grafana dashboard), at their
#                                 paths in the repository, so links between
#                                 them hold
#   include/hourglass/client/     the client library's public headers
#   include/hourglass/v1/         the generated messages and stubs of
#                                 api/hourglass/v1/*.proto
#   lib/                          libhourglass_client.a, libhourglass_api_proto.a,
#                                 libhourglass_shard_hash.a (the client's
#                                 topic-to-shard rule)
#   lib/cmake/Hourglass/          HourglassConfig.cmake, its version file and
#                                 the exported targets Hourglass::client,
#                                 Hourglass::api_proto and
#                                 Hourglass::shard_hash
# The libraries are static; HourglassConfig.cmake finds what they link
# (gRPC, Protobuf, abseil: Debian's packages) with find_dependency.
# With HOURGLASS_CLIENT_ONLY only the client's part is installed: the last
# four (its headers, the generated ones, its libraries and the CMake
# package). bin/, the completion, the systemd unit, its user, the flag file
# and the documentation come with the full build alone
# (examples/client_only.sh checks it).
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

install(TARGETS hourglass_client hourglass_api_proto hourglass_shard_hash
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

# --- The rest: the CLI's completion, hourglassd as a systemd service, and ---
# the documentation. Not for the client library alone.
if(HOURGLASS_CLIENT_ONLY)
  return()
endif()

# The CLI's bash completion, where bash-completion looks for it (also under
# /usr/local/share, which it searches through XDG_DATA_DIRS).
if(TARGET hourglass_bash_completion)
  get_target_property(bash_completion hourglass_bash_completion
    HOURGLASS_COMPLETION_FILE)
  install(FILES ${bash_completion}
    DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
    RENAME hourglass)
endif()

# Relative to the prefix unless absolute. systemd looks for units and
# sysusers.d files under /usr/local/lib and /usr/lib; with another prefix,
# link them (`systemctl link`) or set these to /etc/systemd/system and
# /etc/sysusers.d.
set(HOURGLASS_SYSTEMD_UNIT_DIR lib/systemd/system CACHE STRING
    "Where cmake --install puts hourglassd.service (default lib/systemd/system)")
set(HOURGLASS_SYSUSERS_DIR lib/sysusers.d CACHE STRING
    "Where cmake --install puts the sysusers.d file (default lib/sysusers.d)")

install(FILES ${PROJECT_SOURCE_DIR}/deploy/hourglass.sysusers.conf
  DESTINATION ${HOURGLASS_SYSUSERS_DIR} RENAME hourglass.conf)
# The unit and the flag file: at install time, for the prefix installed to.
install(CODE "
  set(HOURGLASS_SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")
  set(HOURGLASS_BINARY_DIR \"${PROJECT_BINARY_DIR}\")
  set(HOURGLASS_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
  set(HOURGLASS_DOCDIR \"${CMAKE_INSTALL_DOCDIR}\")
  set(HOURGLASS_SYSCONFDIR \"${CMAKE_INSTALL_SYSCONFDIR}\")
  set(HOURGLASS_SYSTEMD_UNIT_DIR \"${HOURGLASS_SYSTEMD_UNIT_DIR}\")
  include(\"${PROJECT_SOURCE_DIR}/cmake/HourglassInstallService.cmake\")")

install(FILES
  ${PROJECT_SOURCE_DIR}/README.md
  ${PROJECT_SOURCE_DIR}/ARCHITECTURE.md
  ${PROJECT_SOURCE_DIR}/BENCHMARKS.md
  ${PROJECT_SOURCE_DIR}/SECURITY.md
  ${PROJECT_SOURCE_DIR}/CHANGELOG.md
  ${PROJECT_SOURCE_DIR}/LICENSE
  DESTINATION ${CMAKE_INSTALL_DOCDIR})
# The README's guides (flags, CLI, metrics, operations, ...) with the
# console's screenshots and the design pages.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs
  FILES_MATCHING PATTERN "*.md" PATTERN "*.png")
install(FILES
  ${PROJECT_SOURCE_DIR}/deploy/README.md
  ${PROJECT_SOURCE_DIR}/deploy/hourglassd.flags
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/deploy)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/prometheus/alerts.yml
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/deploy/prometheus)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/grafana/hourglass.json
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/deploy/grafana)

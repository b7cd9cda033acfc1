# Runs at install time (cmake --install, or the install target), from the
# install(CODE) in HourglassInstall.cmake, which sets:
#   HOURGLASS_SOURCE_DIR, HOURGLASS_BINARY_DIR  the trees
#   HOURGLASS_BINDIR, HOURGLASS_DOCDIR          GNUInstallDirs' relative dirs
#   HOURGLASS_SYSCONFDIR                        CMAKE_INSTALL_SYSCONFDIR
#   HOURGLASS_SYSTEMD_UNIT_DIR                  where the unit goes
# At install time CMAKE_INSTALL_PREFIX is the prefix installed to, also when
# `cmake --install --prefix` overrides the configured one, which is why the
# unit is written here and not at configure time: its paths must be those
# of the prefix it is installed to.
#
# Installs:
#   <unit dir>/hourglassd.service   deploy/hourglassd.service, its paths
#       (/usr/local/bin/hourglassd, /etc/hourglass/hourglassd.flags,
#       file:///usr/local/share/doc/hourglass/) rewritten for the prefix
#   <sysconfdir>/hourglass/hourglassd.flags   deploy/hourglassd.flags, only
#       if no file is there: an operator's settings survive a reinstall
#
# <sysconfdir> is CMAKE_INSTALL_SYSCONFDIR if absolute; else /etc for the
# system prefixes /, /usr and /usr/local, where the unit's
# ConfigurationDirectory (/etc/hourglass) also is; /etc/opt/<name> for
# /opt/<name>, as GNUInstallDirs has it; <prefix>/<it> for any other prefix.
# Every path honours DESTDIR (file(INSTALL) prepends it).

function(hourglass_under_prefix out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "${CMAKE_INSTALL_PREFIX}/${dir}" PARENT_SCOPE)
  endif()
endfunction()

hourglass_under_prefix(bindir "${HOURGLASS_BINDIR}")
hourglass_under_prefix(docdir "${HOURGLASS_DOCDIR}")
hourglass_under_prefix(unitdir "${HOURGLASS_SYSTEMD_UNIT_DIR}")
if(IS_ABSOLUTE "${HOURGLASS_SYSCONFDIR}")
  set(sysconfdir "${HOURGLASS_SYSCONFDIR}")
elseif(CMAKE_INSTALL_PREFIX MATCHES "^/(usr(/local)?)?/?$")
  set(sysconfdir "/${HOURGLASS_SYSCONFDIR}")
elseif(CMAKE_INSTALL_PREFIX MATCHES "^/opt/([^/]+)/?$")
  set(sysconfdir "/${HOURGLASS_SYSCONFDIR}/opt/${CMAKE_MATCH_1}")
else()
  set(sysconfdir "${CMAKE_INSTALL_PREFIX}/${HOURGLASS_SYSCONFDIR}")
endif()

# The unit, with each path of the default prefix replaced; a path missing
# from the file means it changed without this script: stop rather than
# install a unit that names paths nothing installs.
file(READ "${HOURGLASS_SOURCE_DIR}/deploy/hourglassd.service" unit)
foreach(pair
    "/usr/local/bin/hourglassd|${bindir}/hourglassd"
    "/etc/hourglass/hourglassd.flags|${sysconfdir}/hourglass/hourglassd.flags"
    "file:///usr/local/share/doc/hourglass/|file://${docdir}/")
  string(REPLACE "|" ";" pair "${pair}")
  list(GET pair 0 from)
  list(GET pair 1 to)
  string(FIND "${unit}" "${from}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR
      "deploy/hourglassd.service no longer names ${from}; "
      "update cmake/HourglassInstallService.cmake")
  endif()
  string(REPLACE "${from}" "${to}" unit "${unit}")
endforeach()
# One file per destination: installs to two prefixes may run at once (the
# tests do).
string(MD5 destination "$ENV{DESTDIR}|${CMAKE_INSTALL_PREFIX}")
set(generated "${HOURGLASS_BINARY_DIR}/deploy/${destination}/hourglassd.service")
file(WRITE "${generated}" "${unit}")
file(INSTALL DESTINATION "${unitdir}" TYPE FILE
  PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
  FILES "${generated}")

set(flags "${sysconfdir}/hourglass/hourglassd.flags")
if(EXISTS "$ENV{DESTDIR}${flags}")
  message(STATUS "Keeping: $ENV{DESTDIR}${flags} (the defaults are in "
                 "${docdir}/deploy/hourglassd.flags)")
else()
  file(INSTALL DESTINATION "${sysconfdir}/hourglass" TYPE FILE
    PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
    FILES "${HOURGLASS_SOURCE_DIR}/deploy/hourglassd.flags")
endif()

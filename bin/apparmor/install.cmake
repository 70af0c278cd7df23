# Installs rt's AppArmor profile, run by `cmake --install` (CMakeLists.txt
# sets RT_APPARMOR_IN, RT_APPARMOR_RT_DIR and RT_APPARMOR_RT_IMAGE_DIR
# first). It is made here, at install time, so that its paths are those of
# the prefix installed to (cmake --install --prefix X included). It goes to
# PREFIX/share/rt/apparmor/rt always, and to /etc/apparmor.d/rt (under
# DESTDIR) only where that directory exists with AppArmor 4's abi/4.0: a
# host without AppArmor gets nothing there, and no error, and one with an
# older AppArmor (Debian 12's 3.0, whose parser knows neither that ABI nor
# the userns rule, and would fail on the file at every boot) neither.

# PATH as an attachment of a profile: quoted, AppArmor's pattern characters
# escaped (the backslash first).
function(rt_apparmor_attachment var path)
  foreach(c "\\" "\"" "*" "?" "[" "]" "{" "}" "^")
    string(REPLACE "${c}" "\\${c}" path "${path}")
  endforeach()
  set(${var} "\"${path}\"" PARENT_SCOPE)
endfunction()

# AppArmor matches a program by its path with symbolic links resolved: an
# installed prefix through a link (/usr/local -> /opt/local) is named as
# what it leads to. Under DESTDIR the prefix is not there yet; it is taken
# as it is.
set(RT_APPARMOR_PREFIX "${CMAKE_INSTALL_PREFIX}")
if("$ENV{DESTDIR}" STREQUAL "" AND IS_DIRECTORY "${RT_APPARMOR_PREFIX}")
  file(REAL_PATH "${RT_APPARMOR_PREFIX}" RT_APPARMOR_PREFIX)
endif()
cmake_path(NORMAL_PATH RT_APPARMOR_PREFIX)
string(REGEX REPLACE "(.)/$" "\\1" RT_APPARMOR_PREFIX "${RT_APPARMOR_PREFIX}")
rt_apparmor_attachment(RT_APPARMOR_RT "${RT_APPARMOR_PREFIX}/${RT_APPARMOR_RT_DIR}/rt")
rt_apparmor_attachment(RT_APPARMOR_RT_IMAGE "${RT_APPARMOR_PREFIX}/${RT_APPARMOR_RT_IMAGE_DIR}/rt-image")

function(rt_apparmor_install file)
  message(STATUS "Installing: ${file}")
  configure_file("${RT_APPARMOR_IN}" "${file}" @ONLY FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  set(CMAKE_INSTALL_MANIFEST_FILES ${CMAKE_INSTALL_MANIFEST_FILES} "${file}" PARENT_SCOPE)
endfunction()

set(rt_apparmor_copy "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/share/rt/apparmor/rt")
rt_apparmor_install("${rt_apparmor_copy}")
set(rt_apparmor_d "$ENV{DESTDIR}/etc/apparmor.d")
if(NOT IS_DIRECTORY "${rt_apparmor_d}")
  message(STATUS "Not installing rt's AppArmor profile to ${rt_apparmor_d}: no such directory (no AppArmor here)")
elseif(NOT EXISTS "${rt_apparmor_d}/abi/4.0")
  message(STATUS "Not installing rt's AppArmor profile to ${rt_apparmor_d}: no abi/4.0 there (an AppArmor "
    "before 4.0, which neither restricts user namespaces nor knows the userns rule); ${rt_apparmor_copy} is the file")
else()
  rt_apparmor_install("${rt_apparmor_d}/rt")
  message(STATUS "rt's AppArmor profile: where kernel.apparmor_restrict_unprivileged_userns is 1 "
    "(Ubuntu 23.10 and later), load it as root: apparmor_parser -r /etc/apparmor.d/rt")
endif()

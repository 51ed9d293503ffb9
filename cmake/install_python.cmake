# Part of the install (cmake/FeedtuneInstall.cmake sets FEEDTUNE_* first): the
# Python package where the prefix's python3 finds it, and the probe harness in
# share/feedtune, which must find that package from wherever the prefix is.
#   prefix /usr:         lib/python3/dist-packages (Debian's python3 looks there)
#   prefix with python3: its own purelib (a virtual environment)
#   any other prefix:    lib/python3.X/site-packages, X from Debian's python3
# FEEDTUNE_PYTHON_INSTALL_DIR (a cache variable) overrides all three.
# An install script runs with no project and so with CMake 2.x's policies
# (IN_LIST below was a syntax error there): set them as the project's.
cmake_policy(VERSION 3.24)
set(prefix "${CMAKE_INSTALL_PREFIX}")
set(root "$ENV{DESTDIR}")
if(NOT FEEDTUNE_PYTHON_DIR_OVERRIDE STREQUAL "")
  set(python_dir "${FEEDTUNE_PYTHON_DIR_OVERRIDE}")
elseif(prefix STREQUAL "/usr")
  set(python_dir "lib/python3/dist-packages")
elseif(EXISTS "${root}${prefix}/bin/python3")
  execute_process(COMMAND "${root}${prefix}/bin/python3" -c
                          "import sys, sysconfig; print(sysconfig.get_path('purelib'))"
                  OUTPUT_VARIABLE purelib RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "feedtune: ${root}${prefix}/bin/python3 cannot say where its packages go (exit ${rc}); "
                        "set -DFEEDTUNE_PYTHON_INSTALL_DIR=lib/python3.X/site-packages")
  endif()
  file(RELATIVE_PATH python_dir "${root}${prefix}" "${purelib}")
elseif(NOT FEEDTUNE_PYTHON3_MINOR STREQUAL "")
  set(python_dir "lib/python${FEEDTUNE_PYTHON3_MINOR}/site-packages")
else()
  message(FATAL_ERROR "feedtune: no python3 was found when the build was configured, so the Python package has no "
                      "site-packages to go to; install python3, or set -DFEEDTUNE_PYTHON_INSTALL_DIR")
endif()

# file(INSTALL) puts DESTDIR in front of these itself.
set(package_dest "${prefix}/${python_dir}/feedtune")
file(GLOB package_files "${FEEDTUNE_SOURCE_DIR}/python/feedtune/*.py")
file(INSTALL ${package_files} "${FEEDTUNE_VERSION_FILE}" DESTINATION "${package_dest}")
# feedtune.autotune is a package inside it (python/feedtune/autotune/): the
# glob above does not reach into folders, and without it `import feedtune` fails.
file(GLOB autotune_files "${FEEDTUNE_SOURCE_DIR}/python/feedtune/autotune/*.py")
if(NOT autotune_files)
  message(FATAL_ERROR "feedtune: no ${FEEDTUNE_SOURCE_DIR}/python/feedtune/autotune/*.py to install")
endif()
file(INSTALL ${autotune_files} DESTINATION "${package_dest}/autotune")

# The probe names the package's folder relative to its own, so the same file
# works staged (DESTDIR), at the prefix, and moved with it.
set(probe_dest "${prefix}/${FEEDTUNE_DATADIR}/workloads/python")
get_filename_component(scratch "${FEEDTUNE_VERSION_FILE}" DIRECTORY)
set(scratch "${scratch}/../installed")  # in the build folder: the files as installed
file(RELATIVE_PATH probe_to_package "${prefix}/${FEEDTUNE_DATADIR}/workloads/python" "${prefix}/${python_dir}")
file(READ "${FEEDTUNE_SOURCE_DIR}/workloads/python/feedtune_probe.py" probe)
string(REPLACE "_PACKAGE_PARENT, _PACKAGE_FIRST = os.path.join(os.pardir, os.pardir, \"python\"), True"
               "_PACKAGE_PARENT, _PACKAGE_FIRST = \"${probe_to_package}\", False  # written by the install"
               installed_probe "${probe}")
if(installed_probe STREQUAL probe)
  message(FATAL_ERROR "feedtune: workloads/python/feedtune_probe.py has no _PACKAGE_PARENT line to point at the "
                      "installed package; cmake/install_python.cmake and the probe must agree")
endif()
file(WRITE "${scratch}/feedtune_probe.py" "${installed_probe}")
file(INSTALL "${scratch}/feedtune_probe.py" DESTINATION "${probe_dest}"
     FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)

# The binary reads this to tell `feedtune init` users where the package is.
file(RELATIVE_PATH data_to_package "${prefix}/${FEEDTUNE_DATADIR}" "${prefix}/${python_dir}")
file(WRITE "${scratch}/python-dir" "${data_to_package}\n")
file(INSTALL "${scratch}/python-dir" DESTINATION "${prefix}/${FEEDTUNE_DATADIR}")

# Say so when python3 will not find the package there by itself.
if(FEEDTUNE_PYTHON3 AND root STREQUAL "")
  execute_process(COMMAND "${FEEDTUNE_PYTHON3}" -c "import sys; print('\\n'.join(sys.path))"
                  OUTPUT_VARIABLE search_path ERROR_QUIET)
  string(REPLACE "\n" ";" search_path "${search_path}")
  if(NOT "${prefix}/${python_dir}" IN_LIST search_path)
    message(STATUS "feedtune: the Python package is in ${prefix}/${python_dir}, where ${FEEDTUNE_PYTHON3} does not "
                   "look; use PYTHONPATH=${prefix}/${python_dir} (feedtune init's configs say so too)")
  endif()
endif()

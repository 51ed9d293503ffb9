# The Debian package (`make deb`: cpack -G DEB in the build folder):
# build/feedtune_<version>_<arch>.deb with the binary, the configs, the probe,
# the Python package in /usr/lib/python3/dist-packages, the man page and the
# bash completion. Depends: what dpkg-shlibdeps finds the binary linking, and
# python3; Recommends python3-torch (the probe and feedtune.serve need a torch,
# which may as well be a training environment's own).
set(FEEDTUNE_DEB_MAINTAINER "feedtune developers <feedtune@example.org>" CACHE STRING
    "The Maintainer field of the .deb (name <address>)")

# /usr/share/doc/feedtune: the copyright file and changelog Debian asks of
# every package (changelog.gz: a version without a Debian revision makes a
# native package, whose changelog has no ".Debian" in its name).
set(FEEDTUNE_DEB_DOC ${PROJECT_BINARY_DIR}/deb-doc)
string(TIMESTAMP FEEDTUNE_DEB_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)  # SOURCE_DATE_EPOCH when set
file(CONFIGURE OUTPUT ${FEEDTUNE_DEB_DOC}/changelog.Debian CONTENT
"feedtune (${PROJECT_VERSION}) unstable; urgency=medium

  * Built with CMake and CPack from feedtune's sources (feedtune --version
    names the commit).

 -- ${FEEDTUNE_DEB_MAINTAINER}  ${FEEDTUNE_DEB_DATE}
")
add_custom_command(
  OUTPUT ${FEEDTUNE_DEB_DOC}/changelog.gz
  COMMAND ${FEEDTUNE_GZIP} -9nc ${FEEDTUNE_DEB_DOC}/changelog.Debian > ${FEEDTUNE_DEB_DOC}/changelog.gz
  DEPENDS ${FEEDTUNE_DEB_DOC}/changelog.Debian)
add_custom_target(feedtune_deb_doc ALL DEPENDS ${FEEDTUNE_DEB_DOC}/changelog.gz)
install(FILES ${PROJECT_SOURCE_DIR}/cmake/debian/copyright ${FEEDTUNE_DEB_DOC}/changelog.gz
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# cpack (and `make install`) would first build every target, the test suites
# and benches too; `make deb` has built already, and the package needs only
# what the install rules name.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME feedtune)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${FEEDTUNE_DEB_MAINTAINER}")
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR})
# DESTDIR staging with the real prefix, so cmake/install_python.cmake sees
# /usr and puts the package in /usr/lib/python3/dist-packages.
set(CPACK_SET_DESTDIR ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # feedtune_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "python3")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3-torch")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(FEEDTUNE_DEB_BACKEND "host-sim only: built without the CUDA backend")
if(FEEDTUNE_HAVE_CUDA)
  # The name stays feedtune_<version>_<arch>.deb; the description says which build it is.
  set(FEEDTUNE_DEB_BACKEND "CUDA build: the CUDA backend (toolkit ${CMAKE_CUDA_COMPILER_VERSION}) is built in")
endif()
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "tunes PyTorch DataLoader settings to keep the GPU fed")
# The extended description; CPack puts the summary above it as the synopsis.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "feedtune finds, for one machine and one data-loading workload, the PyTorch
DataLoader settings (num_workers, pin_memory, non_blocking, prefetch_factor,
persistent_workers) that keep the GPU fed, measures each trial with repeats,
stores every trial in SQLite, and hands the answer to the training job.
.
This package holds the feedtune command, its ready sweep configs, the probe
harness for torch pipelines, and the feedtune Python module (autotune, serve,
loader_kwargs, watch).
.
${FEEDTUNE_DEB_BACKEND}.")
include(CPack)

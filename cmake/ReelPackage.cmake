# `cpack -G DEB` in a build directory: one Debian package with everything `cmake --install`
# puts under /usr (the reel command, libreel, the plugins, the SDK headers, CMake and pkg-config
# files, the plugin templates). Its Depends come from dpkg-shlibdeps over the binaries, so
# it installs with `apt-get install ./reel_VERSION_ARCH.deb` on a bookworm machine that has only
# the package's runtime libraries. The bundled plugins are whatever this build built
# (REEL_PLUGINS).
set(CPACK_PACKAGE_NAME reel)
set(CPACK_PACKAGE_VENDOR "reel")
set(CPACK_PACKAGE_CONTACT "reel maintainers <reel@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "train multi-label video classifiers (YouTube-8M style); SDK for reel plugins and hosts")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # reel_0.1.0_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_STRIP_FILES ON)  # debug info stays in the build tree
# Depends: dpkg-shlibdeps over the built binaries, at cpack time (see the file).
configure_file(${CMAKE_CURRENT_LIST_DIR}/ReelPackageDepends.cmake.in
               ${CMAKE_BINARY_DIR}/ReelPackageDepends.cmake @ONLY)
set(CPACK_PROJECT_CONFIG_FILE ${CMAKE_BINARY_DIR}/ReelPackageDepends.cmake)
# What the headers need to compile a plugin or host: not found by dpkg-shlibdeps.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "g++, cmake, libboost-dev, libprotobuf-dev, zlib1g-dev")
include(CPack)

# oneDNN for reel's CPU models, as the imported target DNNL::dnnl.
#
# Debian's libdnnl-dev ships a dnnl-config.cmake for a build with the OpenCL GPU runtime, so
# find_package(dnnl) demands the OpenCL headers and ICD loader (ocl-icd-opencl-dev) even though
# reel only ever creates CPU engines. We find the library and its C++ header directly instead, so
# no GPU runtime is a build dependency. The shared library itself still links libOpenCL.so.1 at
# run time, which libdnnl2's own package dependencies install.
if(TARGET DNNL::dnnl)
  return()
endif()
find_path(REEL_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
find_library(REEL_DNNL_LIBRARY NAMES dnnl)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(ReelDnnl REQUIRED_VARS REEL_DNNL_LIBRARY REEL_DNNL_INCLUDE_DIR
                                  FAIL_MESSAGE "oneDNN not found: install libdnnl-dev")
add_library(DNNL::dnnl UNKNOWN IMPORTED)
set_target_properties(DNNL::dnnl PROPERTIES IMPORTED_LOCATION "${REEL_DNNL_LIBRARY}"
                                            INTERFACE_INCLUDE_DIRECTORIES "${REEL_DNNL_INCLUDE_DIR}")

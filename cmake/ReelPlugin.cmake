# reel_add_plugin(NAME SOURCES ... [LIBS ...]): builds a loadable plugin module
# lib/reel/plugins/libreel_<NAME>.so with hidden visibility, so only the entry symbol is exported.
function(reel_add_plugin name)
  cmake_parse_arguments(ARG "" "OUTPUT_DIR" "SOURCES;LIBS" ${ARGN})
  set(installable OFF)
  if(NOT ARG_OUTPUT_DIR)
    set(ARG_OUTPUT_DIR ${REEL_PLUGIN_OUTPUT_DIR})
    set(installable ON)  # test plugins name their own directory and are not installed
  endif()
  add_library(reel_plugin_${name} MODULE ${ARG_SOURCES})
  target_link_libraries(reel_plugin_${name} PRIVATE reel::sdk ${ARG_LIBS})
  set_target_properties(reel_plugin_${name} PROPERTIES
    OUTPUT_NAME reel_${name}
    PREFIX lib
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIR})
  # Every symbol resolved at link time, except in clang's sanitizer builds: there the runtime
  # (__asan_*, __tsan_*) is linked into the executable alone, which provides it to the modules.
  # A build against the installed SDK says so through its flags (CXXFLAGS=-fsanitize=...).
  if(NOT (CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND
          (REEL_SANITIZE OR REEL_TSAN OR REEL_FUZZ OR CMAKE_CXX_FLAGS MATCHES "-fsanitize=")))
    target_link_options(reel_plugin_${name} PRIVATE -Wl,--no-undefined)
  endif()
  if(installable)
    install(TARGETS reel_plugin_${name} LIBRARY DESTINATION lib/reel/plugins)
    set_property(GLOBAL APPEND PROPERTY REEL_INSTALLED_TARGETS reel_plugin_${name})
  endif()
endfunction()

# reel_add_tests(TARGET SOURCES ... LIBS ... [LABELS ...] [COST C]): one GoogleTest binary,
# registered with CTest. COST (default 0) starts its tests before cheaper ones in a parallel
# CTest run that has no timings of its own yet (a fresh clone): give it to binaries with tests of
# a minute, so they do not start last and run alone at the end.
function(reel_add_tests target)
  cmake_parse_arguments(ARG "" "COST" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${target} ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main GTest::gmock)
  # REEL_TEST_COMPILE_OPTIONS (a list, default empty): extra options for the test binary's own
  # sources, after the build type's (scripts/test.sh gives -O0 to its sanitizer builds).
  target_compile_options(${target} PRIVATE ${REEL_TEST_COMPILE_OPTIONS})
  target_compile_definitions(${target} PRIVATE
    REEL_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
    REEL_BINARY_DIR="${CMAKE_BINARY_DIR}"
    REEL_DATA_DIR="${CMAKE_SOURCE_DIR}/data")  # data/yt8m: the real sample shards
  if(NOT ARG_COST)
    set(ARG_COST 0)
  endif()
  gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60
                       PROPERTIES LABELS "${ARG_LABELS}" COST ${ARG_COST})
endfunction()

# reel_add_plugin_check(NAME [ARGS ...]): a CTest, NAME_conformance, running `reel plugins check`
# on plugin NAME's module (with ARGS, e.g. --option COMPONENT.KEY=VALUE or --root URI): the
# descriptor and the conformance checks of every component it registers, and when the calling
# folder has a README.md, that its option tables list exactly the options declared (--readme).
# The reel built here, or out of tree the installed one (REEL_EXECUTABLE, from find_package(reel)).
function(reel_add_plugin_check name)
  cmake_parse_arguments(ARG "" "" "ARGS" ${ARGN})
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/README.md)
    list(APPEND ARG_ARGS --readme ${CMAKE_CURRENT_SOURCE_DIR}/README.md)
  endif()
  if(TARGET reel)
    set(reel_exe $<TARGET_FILE:reel>)
  else()
    set(reel_exe ${REEL_EXECUTABLE})
  endif()
  add_test(NAME ${name}_conformance
           COMMAND ${reel_exe} plugins check $<TARGET_FILE:reel_plugin_${name}> ${ARG_ARGS})
endfunction()

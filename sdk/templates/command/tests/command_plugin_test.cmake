# The command template's own test: `reel linecount FILE` through the installed reel prints the
# file's line and byte counts, and a missing file is an error naming it.
file(READ ${INPUT} text)
string(LENGTH "${text}" bytes)
string(REGEX MATCHALL "\n" newlines "${text}")
list(LENGTH newlines lines)
execute_process(COMMAND ${REEL} --plugin-dir ${PLUGIN_DIR} linecount ${INPUT}
                OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT out STREQUAL "${lines} lines ${bytes} bytes ${INPUT}\n")
  message(FATAL_ERROR "reel linecount ${INPUT}: exit ${rc}, printed '${out}', want ${lines} lines ${bytes} bytes")
endif()
execute_process(COMMAND ${REEL} --plugin-dir ${PLUGIN_DIR} linecount ${INPUT}.missing
                ERROR_VARIABLE err RESULT_VARIABLE rc)
if(rc EQUAL 0 OR NOT err MATCHES "example.txt.missing")
  message(FATAL_ERROR "a missing file: exit ${rc}, stderr '${err}'")
endif()
message(STATUS "${out}")

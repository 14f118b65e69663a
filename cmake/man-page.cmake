# cmake -DTOOL=<path> -DSUMMARY=<one line> -DHELP2MAN=<path> -DOUTPUT=<file.1> -P man-page.cmake
# Writes the tool's man page with help2man from its own --help and --version, so the page never
# drifts from the tool; SUMMARY is the NAME line. A tool with subcommands (CLI11's "Subcommands:"
# list) gets a section per subcommand holding that subcommand's --help.
foreach(var TOOL SUMMARY HELP2MAN OUTPUT)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "man-page.cmake: ${var} is not set")
  endif()
endforeach()
include(${CMAKE_CURRENT_LIST_DIR}/tool-help.cmake)
rtb_tool_help(help "${TOOL}")
rtb_subcommands(subcommands "${help}")

set(include_args "")
if(subcommands)
  set(include_text "")
  foreach(sub IN LISTS subcommands)
    rtb_tool_help(sub_help "${TOOL}" ${sub})
    # Preformatted roff: backslashes escaped, hyphens as minus signs, no line read as a request.
    string(REPLACE "\\" "\\e" sub_help "${sub_help}")
    string(REPLACE "-" "\\-" sub_help "${sub_help}")
    string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" sub_help "${sub_help}")
    string(APPEND include_text "[SUBCOMMAND ${sub}]\n.nf\n${sub_help}\n.fi\n\n")
  endforeach()
  file(WRITE ${OUTPUT}.include "${include_text}")
  set(include_args --include=${OUTPUT}.include)
endif()

execute_process(
  COMMAND ${HELP2MAN} --no-info "--name=${SUMMARY}" ${include_args}
          --section=1 --output=${OUTPUT}.tmp ${TOOL}
  RESULT_VARIABLE status ERROR_VARIABLE errors)
file(REMOVE ${OUTPUT}.include)
if(NOT status EQUAL 0)
  file(REMOVE ${OUTPUT}.tmp)
  message(FATAL_ERROR "help2man failed for ${TOOL}: ${errors}")
endif()
file(RENAME ${OUTPUT}.tmp ${OUTPUT})

# Helpers for the scripts that read a tool's --help (man-page.cmake, bash-completion.cmake).

# rtb_tool_help(<var> <tool> [subcommand]): the tool's (or subcommand's) --help text.
function(rtb_tool_help var tool)
  execute_process(COMMAND ${tool} ${ARGN} --help OUTPUT_VARIABLE text RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${tool} ${ARGN} --help exited ${status}")
  endif()
  set(${var} "${text}" PARENT_SCOPE)
endfunction()

# rtb_help_lines(<var> <help>): the help text as a list of lines (";" kept out of the list).
function(rtb_help_lines var help)
  string(REPLACE ";" "," help "${help}")
  string(REPLACE "\n" ";" lines "${help}")
  set(${var} "${lines}" PARENT_SCOPE)
endfunction()

# rtb_subcommands(<var> <help>): the names in CLI11's "Subcommands:" list, in order.
function(rtb_subcommands var help)
  rtb_help_lines(lines "${help}")
  set(names "")
  set(in_list FALSE)
  foreach(line IN LISTS lines)
    if(line STREQUAL "Subcommands:")
      set(in_list TRUE)
    elseif(in_list AND line MATCHES "^  ([a-z][a-z0-9-]*)( |$)")
      list(APPEND names ${CMAKE_MATCH_1})
    elseif(in_list AND NOT line MATCHES "^   ")
      set(in_list FALSE)
    endif()
  endforeach()
  set(${var} "${names}" PARENT_SCOPE)
endfunction()

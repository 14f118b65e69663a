# cmake -DTOOL=<path> -DNAME=<tool> -DOUTPUT=<file> -P bash-completion.cmake
# Writes a bash completion for the tool from its own --help (CLI11's layout: one option per line,
# two spaces in, `-o,--output TEXT`, a fixed set of values as `TEXT:{a,b,c}`, subcommands under
# "Subcommands:"), so it never drifts from the tool: subcommand names, then options after `-`,
# the values of an option with a fixed set, files otherwise.
foreach(var TOOL NAME OUTPUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "bash-completion.cmake: ${var} is not set")
  endif()
endforeach()
include(${CMAKE_CURRENT_LIST_DIR}/tool-help.cmake)

# Appends to the caller's `option_cases` and `value_cases` the bash case arms for one command
# (`command` is empty for the tool itself, else a subcommand).
function(add_command_options command help)
  rtb_help_lines(lines "${help}")
  set(options "")
  foreach(line IN LISTS lines)
    if(NOT line MATCHES "^  (-[^ ]+)(.*)$")
      continue()
    endif()
    set(rest "${CMAKE_MATCH_2}")
    string(REPLACE "," ";" names "${CMAKE_MATCH_1}")
    list(FILTER names INCLUDE REGEX "^-")
    list(APPEND options ${names})
    if(rest MATCHES "^ [A-Z0-9_]+:{([^}]*)}")
      string(REPLACE "," " " values "${CMAKE_MATCH_1}")
      list(TRANSFORM names PREPEND "${command}/")
      list(JOIN names "|" pattern)
      string(APPEND value_cases "    ${pattern}) values='${values}' ;;\n")
    endif()
  endforeach()
  if(NOT options)
    message(FATAL_ERROR "${TOOL} ${command} --help lists no options")
  endif()
  list(REMOVE_DUPLICATES options)
  list(JOIN options " " words)
  string(APPEND option_cases "    '${command}') options='${words}' ;;\n")
  set(option_cases "${option_cases}" PARENT_SCOPE)
  set(value_cases "${value_cases}" PARENT_SCOPE)
endfunction()

rtb_tool_help(help "${TOOL}")
rtb_subcommands(subcommands "${help}")
set(option_cases "")
set(value_cases "")
add_command_options("" "${help}")
foreach(sub IN LISTS subcommands)
  rtb_tool_help(sub_help "${TOOL}" ${sub})
  add_command_options(${sub} "${sub_help}")
endforeach()
list(JOIN subcommands " " subcommand_words)
list(JOIN subcommands "|" subcommand_pattern)
if(subcommand_pattern STREQUAL "")
  set(subcommand_pattern "''")  # matches no word
endif()

string(MAKE_C_IDENTIFIER "_rtb_${NAME}" function)
file(WRITE ${OUTPUT}.tmp "\
# bash completion for ${NAME} (rl-trainer-bench), generated at build time from `${NAME} --help`:
# subcommands, options after `-`, the values of an option with a fixed set, files otherwise.
${function}() {
  local cur=\${COMP_WORDS[COMP_CWORD]} prev_index=\$((COMP_CWORD - 1)) command= i
  # `--opt=val`: bash splits at `=` (COMP_WORDBREAKS), so the option is two words back.
  if [[ \${COMP_WORDS[prev_index]} == = ]]; then prev_index=\$((prev_index - 1)); fi
  if [[ \$cur == = ]]; then cur=; fi
  for ((i = 1; i < COMP_CWORD; i++)); do
    case \${COMP_WORDS[i]} in ${subcommand_pattern}) command=\${COMP_WORDS[i]}; break ;; esac
  done
  local values= options=
  case \$command/\${COMP_WORDS[prev_index]} in
${value_cases}  esac
  case \$command in
${option_cases}  esac
  if [[ -n \$values ]]; then
    COMPREPLY=(\$(compgen -W \"\$values\" -- \"\$cur\"))
  elif [[ \$cur == -* ]]; then
    COMPREPLY=(\$(compgen -W \"\$options\" -- \"\$cur\"))
  elif [[ -z \$command && -n '${subcommand_words}' ]]; then
    COMPREPLY=(\$(compgen -W '${subcommand_words}' -- \"\$cur\"))
  else
    COMPREPLY=()  # files, by -o default
  fi
}
complete -o default -F ${function} ${NAME}
")
file(RENAME ${OUTPUT}.tmp ${OUTPUT})

# Writes the bash completion for feedtune from the built binary: the commands
# from `feedtune --help`, each command's options from its `--help`, and the
# config keys (for --set key=) from `feedtune config-keys`, the key table's own
# listing. Run by the build after the binary links (cmake/FeedtuneInstall.cmake).
#   cmake -DFEEDTUNE=<binary> -DOUT=<feedtune.bash> -P cmake/write_completion.cmake
execute_process(COMMAND ${FEEDTUNE} --help OUTPUT_VARIABLE main_help RESULT_VARIABLE rc)
string(REGEX MATCH "\nCommands:\n(.*)\n\nOptions:" block "${main_help}")
if(NOT rc EQUAL 0 OR NOT block)
  message(FATAL_ERROR "feedtune completion: `${FEEDTUNE} --help` failed (exit ${rc}) or has no Commands: block")
endif()
string(REGEX MATCHALL "(^|\n)  [a-z][a-z-]*" names "${CMAKE_MATCH_1}")
set(commands "")
set(cases "")
foreach(name IN LISTS names)
  string(STRIP "${name}" name)
  list(APPEND commands "${name}")
  set(help_args "${name}")
  if(name STREQUAL "fleet")
    set(help_args "fleet;slurm")  # the options of both schedulers
  endif()
  execute_process(COMMAND ${FEEDTUNE} ${help_args} --help OUTPUT_VARIABLE help ERROR_QUIET)
  if(name STREQUAL "fleet")
    execute_process(COMMAND ${FEEDTUNE} fleet k8s --help OUTPUT_VARIABLE more ERROR_QUIET)
    string(APPEND help "${more}")
  endif()
  # Only the options block boost::program_options prints ("  --db arg  ..."),
  # not the options the prose mentions of other commands.
  # ("-h [ --help ]": the brackets go first, as a CMake list cannot hold them.)
  string(REGEX REPLACE "[][]" "" help "${help}")
  string(REGEX MATCHALL "\n  (-[a-zA-Z] +)?--[a-z][a-z0-9-]*" options "${help}")
  list(TRANSFORM options REPLACE "^.*(--[a-z][a-z0-9-]*)$" "\\1")
  list(REMOVE_DUPLICATES options)
  list(SORT options)
  list(JOIN options " " options)
  string(APPEND cases "    ${name}) opts=\"${options}\" ;;\n")
endforeach()
list(JOIN commands " " commands)

execute_process(COMMAND ${FEEDTUNE} config-keys OUTPUT_VARIABLE keys_page RESULT_VARIABLE rc)
string(REGEX MATCHALL "\n\\| `[a-z_.0-9]+` \\|" rows "${keys_page}")
if(NOT rc EQUAL 0 OR NOT rows)
  message(FATAL_ERROR "feedtune completion: `${FEEDTUNE} config-keys` failed (exit ${rc}) or lists no keys")
endif()
set(keys "")
foreach(row IN LISTS rows)
  string(REGEX REPLACE "^\n\\| `([a-z_.0-9]+)` \\|$" "\\1=" key "${row}")
  list(APPEND keys "${key}")
endforeach()
list(JOIN keys " " keys)

file(WRITE ${OUT} "# bash completion for feedtune. Generated at build time from the binary's
# --help and `feedtune config-keys` (cmake/write_completion.cmake); do not edit.
_feedtune() {
  local cur prev words cword
  # bash-completion's helpers when they are loaded; plain bash otherwise.
  if declare -F _init_completion >/dev/null; then
    _init_completion -n = || return
  else
    words=(\"\${COMP_WORDS[@]}\"); cword=\$COMP_CWORD
    cur=\${COMP_WORDS[COMP_CWORD]}; prev=\${COMP_WORDS[COMP_CWORD-1]}
  fi
  local commands=\"${commands}\"
  local keys=\"${keys}\"
  if [[ \$cword -eq 1 ]]; then
    COMPREPLY=( \$(compgen -W \"\$commands --help --version\" -- \"\$cur\") )
    return
  fi
  local command=\${words[1]}
  if [[ \$command == fleet && \$cword -eq 2 ]]; then
    COMPREPLY=( \$(compgen -W \"slurm k8s\" -- \"\$cur\") )
    return
  fi
  if [[ \$prev == --set ]]; then
    compopt -o nospace 2>/dev/null
    COMPREPLY=( \$(compgen -W \"\$keys\" -- \"\$cur\") )
    return
  fi
  case \$prev in
    --db|--out|-o|--script|--config|--from|--seed-from|--trace|--feedtune|--python)
      _feedtune_files
      return ;;
  esac
  local opts=\"\"
  case \$command in
${cases}  esac
  if [[ \$cur == -* ]]; then
    COMPREPLY=( \$(compgen -W \"\$opts\" -- \"\$cur\") )
  else
    _feedtune_files '@(yaml|yml|db|py)'
  fi
}
_feedtune_files() {
  if declare -F _filedir >/dev/null; then
    _filedir \"\$@\"
  else
    COMPREPLY=( \$(compgen -f -- \"\$cur\") )
  fi
}
complete -F _feedtune feedtune
")

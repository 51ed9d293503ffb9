# Writes feedtune.1 from the built binary's own help: `feedtune --help` for the
# synopsis and the command list, then each command's `--help` as its section
# (fleet's two schedulers each get one). Run by the build after the binary
# links (cmake/FeedtuneInstall.cmake), so the page is never older than it.
#   cmake -DFEEDTUNE=<binary> -DVERSION=<x.y.z> -DOUT=<feedtune.1> -P cmake/write_man_page.cmake

# Help text as roff: no line may start with a control character, and a
# backslash or a minus must be escaped to print as itself.
function(roff_escape text out)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REPLACE "-" "\\-" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

function(help_of args out)
  execute_process(COMMAND ${FEEDTUNE} ${args} --help OUTPUT_VARIABLE text ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR text STREQUAL "")
    message(FATAL_ERROR "feedtune man page: `feedtune ${args} --help` failed (exit ${rc}): ${err}")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

execute_process(COMMAND ${FEEDTUNE} --help OUTPUT_VARIABLE main_help RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "feedtune man page: `${FEEDTUNE} --help` failed (exit ${rc})")
endif()
# The commands: the first word of each "  name ..." line of the Commands: block.
string(REGEX MATCH "\nCommands:\n(.*)\n\nOptions:" block "${main_help}")
if(NOT block)
  message(FATAL_ERROR "feedtune man page: `feedtune --help` has no Commands: block followed by Options:")
endif()
string(REGEX MATCHALL "(^|\n)  [a-z][a-z-]*" names "${CMAKE_MATCH_1}")
set(commands "")
foreach(name IN LISTS names)
  string(STRIP "${name}" name)
  list(APPEND commands "${name}")
endforeach()

roff_escape("${main_help}" main_roff)
set(page ".TH FEEDTUNE 1 \"\" \"feedtune ${VERSION}\" \"User Commands\"\n")
string(APPEND page ".SH NAME\nfeedtune \\- find the PyTorch DataLoader settings that keep the GPU fed\n")
string(APPEND page ".SH SYNOPSIS\n.B feedtune\n.I command\n[\\fIoptions\\fR]\n")
string(APPEND page ".SH DESCRIPTION\n.nf\n${main_roff}.fi\n")
string(APPEND page ".SH COMMANDS\nEach command's own \\fB\\-\\-help\\fR, as this build prints it.\n")
foreach(command IN LISTS commands)
  set(variants "${command}")
  if(command STREQUAL "fleet")
    set(variants "fleet slurm;fleet k8s")
  endif()
  foreach(variant IN LISTS variants)
    string(REPLACE " " ";" args "${variant}")
    help_of("${args}" help)
    roff_escape("${help}" help_roff)
    roff_escape("${variant}" title)
    string(APPEND page ".SS ${title}\n.nf\n${help_roff}.fi\n")
  endforeach()
endforeach()
string(APPEND page ".SH FILES\n.TP\n.I /usr/share/feedtune/configs\nready sweep configs; \\fBfeedtune sweep configs/quickstart.yaml\\fR finds them from any folder\n")
string(APPEND page ".TP\n.I /usr/share/feedtune/workloads/python/feedtune_probe.py\nthe probe harness the command workload's configs run\n")
string(APPEND page ".SH EXIT STATUS\n0 ok, 1 a failure at run time, 2 bad usage or config, 130 interrupted.\n")
file(WRITE ${OUT} "${page}")

# cmake -DROOT=<source dir> [-DALLOW=<file>|<cited>,...] [-DEXCLUDE=<regex>] -P check_citations.cmake
#
# Fails (exit 1) listing every file that a code comment or a doc page cites
# and the repository does not have, so that no comment sends a reader to a
# page a clone lacks. What counts as a citation:
#   - in the comments of C++ (after //), CMake, Python, shell and YAML files
#     (after #), and anywhere in Markdown: a path under one of the project's
#     folders ("docs/search.md", "tuner/search/budget.h") or a top-level page
#     ("README.md"); a path followed by ":<digit>" is an example of a message
#     location ("configs/x.yaml:7:3: ..."), and a path with a glob is a pattern,
#     so neither is checked;
#   - in Markdown, the target of a link, relative to the page.
# ALLOW names citations that are known and owned elsewhere for now, each as
# "<file>|<cited>"; keep it short and empty it as they are fixed. EXCLUDE
# leaves out the files whose path (from ROOT) matches it.
cmake_policy(VERSION 3.24)
set(folders loader workloads tuner results tests bench docs python examples scripts cmake configs .ci)
string(REPLACE "," ";" allow "${ALLOW}")

set(files CMakeLists.txt Makefile README.md)
foreach(folder IN LISTS folders)
  file(GLOB_RECURSE found LIST_DIRECTORIES false RELATIVE ${ROOT} ${ROOT}/${folder}/*)
  list(APPEND files ${found})
endforeach()
list(FILTER files INCLUDE REGEX "(\\.(cc|h|txt|cmake|py|md|yaml|sh|in)|/Makefile|^Makefile)$")
list(FILTER files EXCLUDE REGEX "(^|/)(build[^/]*|__pycache__|[^/]*\\.egg-info)/")
if(EXCLUDE)
  list(FILTER files EXCLUDE REGEX "${EXCLUDE}")
endif()

string(JOIN "|" folder_alternatives ${folders})
string(REPLACE "." "\\." folder_alternatives "${folder_alternatives}")
set(path_regex "[A-Za-z0-9_./*-]+\\.(md|h|cc|py|cmake|txt|yaml|sh|in|png)(:[0-9])?")
set(missing "")
set(read 0)
foreach(file IN LISTS files)
  if(NOT EXISTS ${ROOT}/${file})
    continue()
  endif()
  math(EXPR read "${read} + 1")
  get_filename_component(dir ${file} DIRECTORY)
  # Where a comment starts; Markdown is read whole.
  if(file MATCHES "\\.md$")
    set(kind markdown)
  elseif(file MATCHES "\\.(cc|h)$")
    set(kind code)
    set(comment "//")
  else()
    set(kind code)
    set(comment "#")
  endif()
  # One list element a line. Brackets and semicolons would group or split
  # CMake list elements, so they become braces and commas first (a link
  # "[text](target)" reads "{text}(target)"). Only the lines that can hold a citation
  # are kept; their numbers are found again on failure.
  file(READ ${ROOT}/${file} content)
  string(REPLACE "[" "{" content "${content}")
  string(REPLACE "]" "}" content "${content}")
  string(REPLACE ";" "," content "${content}")
  string(REPLACE "\\" "/" content "${content}")
  string(REPLACE "\n" ";" lines "${content}")
  list(FILTER lines INCLUDE REGEX "[A-Za-z0-9_-]\\.(md|h|cc|py|cmake|txt|yaml|sh|in|png)|}\\(")
  foreach(line IN LISTS lines)
    set(text "${line}")
    if(kind STREQUAL "code")
      string(FIND "${line}" "${comment}" at)
      if(at LESS 0)
        continue()
      endif()
      string(SUBSTRING "${line}" ${at} -1 text)
    endif()
    set(cited "")
    string(REGEX MATCHALL "${path_regex}" tokens "${text}")
    foreach(token IN LISTS tokens)
      if(token MATCHES ":[0-9]$" OR token MATCHES "\\*")
        continue()
      endif()
      if(token MATCHES "^(${folder_alternatives})/")
        if(NOT EXISTS ${ROOT}/${token})
          list(APPEND cited "${token}")
        endif()
      elseif(token MATCHES "^[A-Z][A-Za-z_-]*\\.md$")
        if(NOT EXISTS ${ROOT}/${token} AND NOT EXISTS ${ROOT}/${dir}/${token})
          list(APPEND cited "${token}")
        endif()
      endif()
    endforeach()
    if(kind STREQUAL "markdown")
      string(REGEX MATCHALL "}\\([^)# ]+" links "${line}")
      foreach(link IN LISTS links)
        string(SUBSTRING "${link}" 2 -1 target)
        if(target MATCHES "^[a-z]+:")
          continue()
        endif()
        get_filename_component(resolved "${target}" ABSOLUTE BASE_DIR "${ROOT}/${dir}")
        if(NOT EXISTS "${resolved}")
          list(APPEND cited "${target}")
        endif()
      endforeach()
    endif()
    foreach(target IN LISTS cited)
      if("${file}|${target}" IN_LIST allow)
        continue()
      endif()
      # The line's number, for the message: the lines before its first mention, plus one.
      string(FIND "${content}" "${target}" found_at)
      string(SUBSTRING "${content}" 0 ${found_at} before)
      string(REGEX MATCHALL "\n" separators "${before}")
      list(LENGTH separators number)
      math(EXPR number "${number} + 1")
      string(APPEND missing "  ${file}:${number}: cites ${target}\n")
    endforeach()
  endforeach()
endforeach()

if(missing)
  message(FATAL_ERROR "citations: a comment or doc cites a file the repository does not have "
                      "(${read} files read):\n${missing}"
                      "Cite a page of docs/ that holds the reason, or say the reason in the comment.")
endif()

# citations.RefusesACitedFileThatIsNotThere: writes a fixture tree into WORK,
# runs the citation checker on it, removes it, and checks what was refused: a
# comment that cites a missing page and a Markdown link to a missing file,
# each named with its line, while a cited file that is there passes. The
# fixture lives only while the test runs, so neither the sources nor a build
# tree hold a citation of a missing file; the cited names are put together
# so that no path is spelled out.
set(missing_page "docs/gone")
set(present_page "docs/page")
set(missing_notes "../NOTES")
file(REMOVE_RECURSE "${WORK}")
file(WRITE "${WORK}/tuner/cites_missing.h"
  "// A header whose comment cites a page that is not there (${missing_page}.md), and\n"
  "// one that is (${present_page}.md).\n#pragma once\n")
file(WRITE "${WORK}/${present_page}.md"
  "# A page that cites what the repository lacks\n\n"
  "The check must refuse this link: [the old notes](${missing_notes}.md).\n")
execute_process(COMMAND "${CMAKE_COMMAND}" "-DROOT=${WORK}" -P "${CHECKER}"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
file(REMOVE_RECURSE "${WORK}")
set(said "${out}${err}")
message("${said}")
if(rc EQUAL 0)
  message(FATAL_ERROR "the checker passed a tree that cites missing files")
endif()
if(NOT said MATCHES "tuner/cites_missing.h:1: cites ${missing_page}\\.md.*${present_page}\\.md:3: cites ${missing_notes}\\.md")
  message(FATAL_ERROR "the checker did not name both missing citations with their lines")
endif()
if(said MATCHES "cites ${present_page}\\.md")
  message(FATAL_ERROR "the checker refused a cited file that is there")
endif()

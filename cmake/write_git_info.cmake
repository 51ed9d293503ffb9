# Run at every build (tuner/cli/CMakeLists.txt, target feedtune_git_info):
# writes OUT, a header with the source tree's commit ("2712853a1b2c", with
# "-dirty" when tracked files differ from it), and touches it only when that
# changes, so an unchanged tree rebuilds nothing. Without git or outside a
# checkout (a source tarball) the commit reads "unknown", or FEEDTUNE_GIT_COMMIT
# from the environment when a packager sets it.
#   cmake -DSOURCE=<checkout> -DOUT=<header> -P cmake/write_git_info.cmake
set(commit "unknown")
if(DEFINED ENV{FEEDTUNE_GIT_COMMIT} AND NOT "$ENV{FEEDTUNE_GIT_COMMIT}" STREQUAL "")
  set(commit "$ENV{FEEDTUNE_GIT_COMMIT}")
else()
  find_program(GIT git)
  if(GIT)
    execute_process(COMMAND ${GIT} -C ${SOURCE} rev-parse --short=12 HEAD
                    OUTPUT_VARIABLE head RESULT_VARIABLE head_rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(head_rc EQUAL 0 AND head)
      set(commit "${head}")
      # --no-optional-locks: a status that refreshes the index would take
      # index.lock, and fail someone's commit running beside the build.
      execute_process(COMMAND ${GIT} --no-optional-locks -C ${SOURCE} status --porcelain --untracked-files=no
                      OUTPUT_VARIABLE changes RESULT_VARIABLE status_rc ERROR_QUIET)
      if(status_rc EQUAL 0 AND NOT changes STREQUAL "")
        string(APPEND commit "-dirty")
      endif()
    endif()
  endif()
endif()
set(text "// Generated at build time by cmake/write_git_info.cmake.\n#pragma once\nnamespace feedtune::cli {\ninline constexpr const char* kGitCommit = \"${commit}\";\n}  // namespace feedtune::cli\n")
file(WRITE ${OUT}.tmp "${text}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)

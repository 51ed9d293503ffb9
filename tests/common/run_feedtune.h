// Runs the feedtune binary of this build as a user would, through the shell,
// and returns its exit code and output. FEEDTUNE_BINARY comes from
// tests/CMakeLists.txt.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/common/read_file.h"

namespace feedtune::testing_util {

struct CliResult {
  int code = -1;    // exit code, or 128 + the signal that ended it
  std::string out;  // stdout
  std::string err;  // stderr
};

// `feedtune ARGS` (ARGS as typed in a shell), run in `cwd` when given; its
// output goes through files in `scratch`.
inline CliResult RunFeedtune(const std::string& args, const std::filesystem::path& scratch,
                             const std::string& cwd = {}) {
  const std::string cmd = (cwd.empty() ? std::string() : "cd " + cwd + " && ") + FEEDTUNE_BINARY + " " + args +
                          " >" + (scratch / "out").string() + " 2>" + (scratch / "err").string();
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = ReadFile(scratch / "out");
  r.err = ReadFile(scratch / "err");
  return r;
}

}  // namespace feedtune::testing_util

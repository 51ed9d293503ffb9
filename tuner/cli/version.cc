#include <string>

#include "tuner/cli/git_info.h"
#include "tuner/cli/version.h"

namespace feedtune::cli {

std::string BuildString() {
  const std::string cuda = kCudaToolkit[0] != '\0' ? std::string("CUDA ") + kCudaToolkit : std::string("CUDA off");
  return std::string(kVersion) + " (git " + kGitCommit + ", " + kCompiler + ", " + cuda + ")";
}

}  // namespace feedtune::cli

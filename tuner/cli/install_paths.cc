#include "tuner/cli/install_paths.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <system_error>

// FEEDTUNE_BIN_TO_DATA: share/feedtune relative to bin (GNUInstallDirs, set by
// tuner/cli/CMakeLists.txt), the same whatever prefix the install gets.
// FEEDTUNE_SOURCE_DIR: the checkout this binary was built from.
#ifndef FEEDTUNE_BIN_TO_DATA
#error "FEEDTUNE_BIN_TO_DATA must be defined by the build"
#endif
#ifndef FEEDTUNE_SOURCE_DIR
#error "FEEDTUNE_SOURCE_DIR must be defined by the build"
#endif

namespace feedtune::cli {
namespace {

namespace fs = std::filesystem;

// The install writes share/feedtune/python-dir: the Python package's folder
// relative to share/feedtune, which depends on the prefix chosen at install
// time (lib/python3/dist-packages under /usr, site-packages elsewhere).
std::string InstalledPythonDir(const fs::path& data_dir) {
  std::ifstream in(data_dir / "python-dir");
  std::string relative;
  if (!in || !std::getline(in, relative) || relative.empty()) return {};
  std::error_code error;
  const fs::path dir = fs::weakly_canonical(data_dir / relative, error);
  return error ? (data_dir / relative).lexically_normal().string() : dir.string();
}

DataRoot FindDataRoot() {
  DataRoot root;
  std::error_code error;
  const fs::path self = fs::canonical("/proc/self/exe", error);
  if (!error) {
    // An installed binary is recognised by its data beside it, never by its
    // prefix: a staged install (DESTDIR) and a relocated one work alike.
    const fs::path data = (self.parent_path() / FEEDTUNE_BIN_TO_DATA).lexically_normal();
    if (fs::is_directory(data / "configs", error)) {
      root.dir = data.string();
      root.installed = true;
      root.python_dir = InstalledPythonDir(data);
      return root;
    }
  }
  const fs::path source = FEEDTUNE_SOURCE_DIR;
  if (fs::is_directory(source / "configs", error)) {
    root.dir = source.string();
    root.python_dir = (source / "python").string();
  }
  return root;
}

bool IsRelativePath(const std::string& arg) {
  // Placeholders ({num_workers}) and options are not paths; a bare word is a
  // program name for PATH, not a file here.
  return !arg.empty() && arg.front() != '/' && arg.front() != '-' && arg.find('/') != std::string::npos &&
         arg.find('{') == std::string::npos;
}

// `path` under the data root, or empty when it is not there.
std::string UnderRoot(const std::string& path) {
  const DataRoot& root = ThisDataRoot();
  if (root.dir.empty()) return {};
  std::error_code error;
  const fs::path candidate = fs::path(root.dir) / path;
  return fs::exists(candidate, error) ? candidate.lexically_normal().string() : std::string();
}

const char* RootName() {
  return ThisDataRoot().installed ? "installed with this binary" : "the checkout this binary was built from";
}

}  // namespace

const DataRoot& ThisDataRoot() {
  static const DataRoot root = FindDataRoot();
  return root;
}

std::string ResolveDataPath(const std::string& path) {
  std::error_code error;
  if (path.empty() || fs::path(path).is_absolute() || fs::exists(path, error)) return path;
  const std::string found = UnderRoot(path);
  if (found.empty()) return path;
  std::cerr << "feedtune: " << path << " is not in " << fs::current_path(error).string() << "; using " << found
            << " (" << RootName() << ")\n";
  return found;
}

void ResolveCommandPaths(tuner::SweepConfig& config) {
  if (config.workload.kind != workloads::WorkloadKind::kCommand) return;
  std::vector<std::string> written = config.workload.command.argv;
  bool changed = false;
  for (std::string& arg : config.workload.command.argv) {
    std::error_code error;
    if (!IsRelativePath(arg) || fs::exists(arg, error)) continue;
    const std::string found = UnderRoot(arg);
    if (found.empty()) continue;
    arg = found;
    changed = true;
  }
  if (changed && config.argv_as_written.empty()) config.argv_as_written = std::move(written);
}

}  // namespace feedtune::cli

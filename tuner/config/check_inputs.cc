// What a config reads from this machine: the config file itself (LoadConfig),
// and the inputs it names (a dataset's directory, a format's file, shard
// files). The only part of the config that touches the file system and the
// workloads' formats; ParseConfig never calls it.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "tuner/config/config.h"
#include "tuner/config/parser.h"
#include "workloads/format_io.h"
#include "workloads/remote_dataset.h"
#include "workloads/jpeg_image.h"
#include "workloads/shard_format.h"

namespace feedtune::tuner {
namespace config_internal {

void Parser::CheckInputs(const SweepConfig& config) const {
  if (workloads::IsRemotePath(config.workload.files.path)) {
    CheckRemoteInput(config);
    return;
  }
  if (workloads::IsFormatKind(config.workload.kind)) {
    CheckFormatInput(config);
    return;
  }
  if (config.workload.kind != WorkloadKind::kFiles) return;
  const workloads::FilesOptions& files = config.workload.files;
  const bool jpeg = files.decode == workloads::FilesDecode::kJpeg;
  const std::string make = "make one with `feedtune gen-data --out " + files.path + " --layout " +
                           (jpeg ? "jpeg" : workloads::FilesLayoutName(files.layout)) + " ...`";
  const auto fail = [&](const std::string& why) {
    FailAtFirstGiven({"workload.path", "workload.kind"},
                     "expected a directory holding a dataset, got \"" + files.path + "\" (" +
                         why + ")");
  };
  struct stat info {};
  if (::stat(files.path.c_str(), &info) != 0) {
    fail(std::generic_category().message(errno) + "; " + make);
  }
  if (!S_ISDIR(info.st_mode)) fail("not a directory");
  DIR* dir = ::opendir(files.path.c_str());
  if (dir == nullptr) fail("cannot list it: " + std::generic_category().message(errno));
  bool empty = true;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") {
      empty = false;
      break;
    }
  }
  ::closedir(dir);
  if (empty) fail("the directory is empty; " + make);
  if (files.layout == workloads::FilesLayout::kShards) {
    const std::string index = files.path + "/" + workloads::kIndexFileName;
    if (::stat(index.c_str(), &info) != 0) {
      fail(std::string("no ") + workloads::kIndexFileName +
           ", so not a sharded dataset; for a directory of your own files use layout: files");
    }
  }
  if (jpeg && !HasJpegFile(files.path)) {
    FailAtFirstGiven({"workload.path", "workload.decode"},
                     "expected a directory holding JPEG images (files named *.jpg, *.jpeg or *.jpe, in any "
                     "folder under it) when workload.decode is jpeg, got \"" + files.path + "\" (none there; " +
                         make + ")");
  }
}

bool Parser::HasJpegFile(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.empty() && name[0] == '.') {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (workloads::HasJpegExtension(name) && it->is_regular_file(ec)) return true;
  }
  return false;
}

// A remote path: a URL that parses, for what is read remotely (one object per
// sample; the store itself is asked when the workload opens, so a config can be
// checked without network or credentials).
void Parser::CheckRemoteInput(const SweepConfig& config) const {
  try {
    (void)workloads::RemoteLocationOf(config.workload.kind, config.workload.files);
  } catch (const std::invalid_argument& e) {
    FailAtFirstGiven({"workload.path", "workload.kind"}, e.what());
  }
}

void Parser::CheckFormatInput(const SweepConfig& config) const {
  const WorkloadKind kind = config.workload.kind;
  const std::string& path = config.workload.files.path;
  const std::string kind_name = workloads::WorkloadKindName(kind);
  if (kind == WorkloadKind::kTfRecord || kind == WorkloadKind::kTar) {
    CheckShardInput(config);
    return;
  }
  const std::string expected =
      "expected " + std::string(kind == WorkloadKind::kNpy ? "a " : "an ") + FormatPathNoun(kind) + ", got \"" +
      path + "\" (";
  const std::string make = "; make one with `feedtune gen-data --layout " + kind_name + " --out " + path + " ...`";
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    FailAtFirstGiven({"workload.path", "workload.kind"},
                     expected + std::generic_category().message(errno) + make + ")");
  }
  if (kind != WorkloadKind::kLmdb && !S_ISREG(info.st_mode)) {
    FailAtFirstGiven({"workload.path", "workload.kind"},
                     expected + (S_ISDIR(info.st_mode) ? "a directory" : "not a regular file") + ")");
  }
  if (kind == WorkloadKind::kLmdb && !S_ISDIR(info.st_mode) && !S_ISREG(info.st_mode)) {
    FailAtFirstGiven({"workload.path", "workload.kind"}, expected + "neither a directory nor a file)");
  }
}

void Parser::CheckShardInput(const SweepConfig& config) const {
  const WorkloadKind kind = config.workload.kind;
  const workloads::FilesOptions& files = config.workload.files;
  const std::vector<std::string> entries = files.path_list.empty() ? std::vector{files.path} : files.path_list;
  const auto marks = list_item_marks_.find("workload.path");
  for (size_t i = 0; i < entries.size(); ++i) {
    try {
      workloads::ResolveShardPaths(entries[i], workloads::ShardExtensions(kind));
    } catch (const std::exception& e) {  // DatasetNotFound, or a directory that cannot be listed
      std::string why = e.what();
      if (why.starts_with(entries[i] + ": ")) why.erase(0, entries[i].size() + 2);
      const bool glob_or_list = !files.path_list.empty() || entries[i].find_first_of("*?[") != std::string::npos;
      const std::string what = "expected a " + std::string(FormatPathNoun(kind)) + ", got \"" + entries[i] +
                               "\" (" + why + "; make one with `feedtune gen-data --layout " +
                               workloads::WorkloadKindName(kind) + " --out " + (glob_or_list ? "DIR" : entries[i]) +
                               " ...`)";
      if (files.path_list.empty()) FailAtFirstGiven({"workload.path", "workload.kind"}, what);
      const bool marked = marks != list_item_marks_.end() && i < marks->second.size();
      Fail(marked ? marks->second[i] : NoMark(), "workload.path[" + std::to_string(i) + "]", what);
    }
  }
}

}  // namespace config_internal

namespace {

// Configs are a few hundred bytes. This limit, like parse.cc's kMaxNesting, is
// checked before yaml-cpp sees the text, whose memory grows far out of
// proportion on huge or deeply nested input (16 MiB of "[" took 3.9 GB).
constexpr off_t kMaxConfigBytes = off_t{1} << 20;

// Reads a whole file, refusing directories and anything implausibly large.
std::string ReadConfigFile(const std::string& path) {
  const auto fail = [&](int error) -> std::string {
    throw ConfigError(path + ": cannot read config: " + std::generic_category().message(error));
  };
  const auto too_big = [&]() -> std::string {
    throw ConfigError(path + ": cannot read config: larger than " +
                      std::to_string(kMaxConfigBytes >> 20) + " MiB");
  };
  struct Fd {  // closes on every exit path, including throws
    int fd;
    ~Fd() {
      if (fd >= 0) ::close(fd);
    }
  } file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) return fail(errno);
  struct stat info;
  if (::fstat(file.fd, &info) != 0) return fail(errno);
  if (S_ISDIR(info.st_mode)) return fail(EISDIR);
  if (S_ISREG(info.st_mode) && info.st_size > kMaxConfigBytes) return too_big();
  std::string text;
  std::array<char, 65536> buffer;
  for (;;) {
    const ssize_t n = ::read(file.fd, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(errno);
    }
    if (n == 0) break;
    text.append(buffer.data(), static_cast<size_t>(n));
    if (static_cast<off_t>(text.size()) > kMaxConfigBytes) return too_big();
  }
  return text;
}

}  // namespace

SweepConfig LoadConfig(const std::string& path) {
  return config_internal::Parse(ReadConfigFile(path), path, /*check_inputs=*/true);
}

}  // namespace feedtune::tuner

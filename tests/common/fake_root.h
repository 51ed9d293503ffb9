// A scratch filesystem root for the readers that take one (results::
// ReadFingerprint, results::ReadOomKills): a temp folder holding only the
// /proc, /sys and /etc files a test writes into it, removed at the end.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace feedtune::testing_util {

class FakeRoot {
 public:
  FakeRoot() {
    std::string pattern = (std::filesystem::temp_directory_path() / "feedtune_fake_root.XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    root_ = pattern;
  }
  ~FakeRoot() {
    std::error_code error;
    std::filesystem::remove_all(root_, error);
  }
  FakeRoot(const FakeRoot&) = delete;
  FakeRoot& operator=(const FakeRoot&) = delete;

  // Writes `text` to `relative` (e.g. "proc/self/cgroup"), creating its folders.
  void Write(const std::string& relative, const std::string& text) const {
    const std::filesystem::path path = root_ / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
  std::string root() const { return root_.string(); }
  std::string path(const std::string& relative) const { return (root_ / relative).string(); }

 private:
  std::filesystem::path root_;
};

}  // namespace feedtune::testing_util

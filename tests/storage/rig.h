// Rig: the S3 rig (scripts/s3-rig, docs/storage-rig.md) from a C++ test: start
// it in a fresh temporary folder, change its injector, upload, stop. Owned by
// one test suite (SetUpTestSuite / TearDownTestSuite), on the test's thread.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "storage/credentials.h"

namespace feedtune::storage::testing {

// What a command printed and its exit code.
struct CommandResult {
  int code = -1;
  std::string output;
};
CommandResult RunCommand(const std::string& command);

class Rig {
 public:
  // Makes a temporary folder; starts nothing.
  Rig();
  // Stops the rig if it runs and removes the folder.
  ~Rig();
  Rig(const Rig&) = delete;
  Rig& operator=(const Rig&) = delete;

  // `scripts/s3-rig start --dir DIR/rig ARGS`; its exit code (77: not installed).
  CommandResult Start(const std::string& args = "");
  void Stop();
  // `s3-rig set` (throws when it fails).
  void Set(const std::string& args);
  // Uploads a local file or folder to s3://BUCKET/KEY-or-PREFIX/ (throws when it fails).
  void Put(const std::filesystem::path& source, const std::string& destination);

  const std::filesystem::path& dir() const { return dir_; }
  // DIR/rig/rig.json as it was after Start.
  const nlohmann::json& info() const { return info_; }
  std::string endpoint() const { return info_.at("endpoint_url"); }
  std::string http_url() const { return info_.at("http_url"); }
  std::filesystem::path http_root() const { return std::string(info_.at("http_root")); }
  // The environment a client of the rig would have (DIR/rig/env), HOME an
  // empty folder so that no ~/.aws of the machine is read.
  Environment env() const;

 private:
  std::string Script() const;
  std::filesystem::path dir_;
  bool running_ = false;
  nlohmann::json info_;
};

// Deterministic bytes for a test object named `name`.
std::string TestBytes(const std::string& name, size_t size);

}  // namespace feedtune::storage::testing

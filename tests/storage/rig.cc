#include "tests/storage/rig.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace feedtune::storage::testing {

CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run: " + command);
  std::array<char, 4096> chunk{};
  size_t n = 0;
  while ((n = fread(chunk.data(), 1, chunk.size(), pipe)) > 0) result.output.append(chunk.data(), n);
  const int status = pclose(pipe);
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

Rig::Rig() {
  std::string pattern = (std::filesystem::temp_directory_path() / "feedtune-storage-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
  dir_ = pattern;
  std::filesystem::create_directories(dir_ / "home");
}

Rig::~Rig() {
  try {
    Stop();
  } catch (...) {  // a destructor never throws; the folder goes anyway
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string Rig::Script() const { return std::string(FEEDTUNE_SOURCE_DIR) + "/scripts/s3-rig"; }

CommandResult Rig::Start(const std::string& args) {
  CommandResult result = RunCommand(Script() + " start --dir " + (dir_ / "rig").string() + " " + args);
  if (result.code == 0) {
    running_ = true;
    std::ifstream in(dir_ / "rig" / "rig.json");
    info_ = nlohmann::json::parse(in);
  }
  return result;
}

void Rig::Stop() {
  if (!running_) return;
  running_ = false;
  const CommandResult result = RunCommand(Script() + " stop --dir " + (dir_ / "rig").string());
  if (result.code != 0) throw std::runtime_error("s3-rig stop failed: " + result.output);
}

void Rig::Set(const std::string& args) {
  const CommandResult result = RunCommand(Script() + " set --dir " + (dir_ / "rig").string() + " " + args);
  if (result.code != 0) throw std::runtime_error("s3-rig set " + args + " failed: " + result.output);
}

void Rig::Put(const std::filesystem::path& source, const std::string& destination) {
  const CommandResult result =
      RunCommand(Script() + " put --dir " + (dir_ / "rig").string() + " '" + source.string() + "' " + destination);
  if (result.code != 0) throw std::runtime_error("s3-rig put failed: " + result.output);
}

Environment Rig::env() const {
  Environment env = {
      {"HOME", (dir_ / "home").string()},
      {"AWS_ACCESS_KEY_ID", info_.at("access_key_id")},
      {"AWS_SECRET_ACCESS_KEY", info_.at("secret_access_key")},
      {"AWS_REGION", info_.at("region")},
      {"AWS_ENDPOINT_URL", info_.at("endpoint_url")},
  };
  if (info_.contains("session_token") && info_.at("session_token").is_string()) {
    env["AWS_SESSION_TOKEN"] = info_.at("session_token");
  }
  return env;
}

std::string TestBytes(const std::string& name, size_t size) {
  uint64_t state = 1469598103934665603ull;  // FNV-1a of the name seeds an LCG
  for (char c : name) state = (state ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    bytes[i] = static_cast<char>(state >> 56);
  }
  return bytes;
}

}  // namespace feedtune::storage::testing

#include "tuner/measure/rank_facts.h"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "tuner/measure/proc_stats.h"

namespace feedtune::tuner::node {
namespace {

struct Status {
  long ppid = -1;
  int threads = 0;
  std::string cpus;
};

// /proc/PID/status: PPid, Threads and Cpus_allowed_list. getline, not a
// stream iterator: a process that exits mid-read is simply gone.
bool ReadStatus(const std::string& pid, Status* out) {
  std::ifstream in("/proc/" + pid + "/status");
  if (!in) return false;
  std::string line;
  bool any = false;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon);
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    if (key == "PPid") {
      out->ppid = std::atol(value.c_str());
      any = true;
    } else if (key == "Threads") {
      out->threads = std::atoi(value.c_str());
    } else if (key == "Cpus_allowed_list") {
      out->cpus = value;
    }
  }
  return any;
}

// The entries of a folder, "." and ".." and hidden ones aside; 0 when it cannot be read.
int CountEntries(const char* path) {
  int n = 0;
  if (DIR* dir = opendir(path)) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] != '.') ++n;
    }
    closedir(dir);
  }
  return n;
}

int64_t MemfdBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  int64_t bytes = 0;
  while (std::getline(in, line)) {
    if (line.find("/memfd:") == std::string::npos) continue;
    const auto dash = line.find('-');
    const auto space = line.find(' ');
    if (dash == std::string::npos || space == std::string::npos) continue;
    const auto begin = std::strtoull(line.substr(0, dash).c_str(), nullptr, 16);
    const auto end = std::strtoull(line.substr(dash + 1, space - dash - 1).c_str(), nullptr, 16);
    bytes += static_cast<int64_t>(end - begin);
  }
  return bytes;
}

}  // namespace

std::string CpuListOfProcess(pid_t pid) {
  Status s;
  return ReadStatus(std::to_string(pid), &s) ? s.cpus : std::string();
}

TreeFacts ReadTreeFacts(pid_t pid) {
  TreeFacts facts;
  Status own;
  if (!ReadStatus(std::to_string(pid), &own)) return facts;
  facts.cpu_mask = own.cpus;
  facts.processes = 1;
  facts.threads = own.threads;
  facts.shm_bytes = MemfdBytes(pid);

  std::set<std::string> masks;
  ForEachDescendant<Status>(pid, ReadStatus, [&](const Status& s) {
    ++facts.processes;
    facts.threads += s.threads;
    masks.insert(s.cpus);
  });
  for (const std::string& m : masks) facts.worker_cpu_masks += (facts.worker_cpu_masks.empty() ? "" : "; ") + m;
  return facts;
}

int OwnThreads() { return CountEntries("/proc/self/task"); }

int VisibleGpuCount() {
  const int present = CountEntries("/proc/driver/nvidia/gpus");
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr) return present;
  int listed = 0;
  std::stringstream list(visible);
  for (std::string item; std::getline(list, item, ',');) {
    if (!item.empty()) ++listed;
  }
  return std::min(listed, present);
}

}  // namespace feedtune::tuner::node

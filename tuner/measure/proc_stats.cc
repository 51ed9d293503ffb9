#include "tuner/measure/proc_stats.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace feedtune::tuner {
namespace {

struct ProcStat {
  long pid = 0;
  long ppid = 0;
  double cpu_s = 0;  // own utime + stime, plus cutime + cstime of reaped children
  int64_t rss_bytes = 0;
};

// Fields of /proc/PID/stat after the command name: state is field 3 (index 0
// here), ppid 4, utime 14, stime 15, cutime 16, cstime 17, rss 24 (in pages).
bool ReadStat(const std::string& pid, ProcStat* stat) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string line;
  if (!std::getline(in, line)) return false;
  const auto close = line.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return false;
  std::istringstream fields(line.substr(close + 2));
  std::string f;
  long values[22] = {};
  for (int i = 0; i < 22 && fields >> f; ++i) values[i] = i == 0 ? 0 : std::atol(f.c_str());
  static const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  static const int64_t page = sysconf(_SC_PAGESIZE);
  stat->ppid = values[1];
  stat->cpu_s = static_cast<double>(values[11] + values[12] + values[13] + values[14]) / ticks;
  stat->rss_bytes = static_cast<int64_t>(values[21]) * page;
  return true;
}

}  // namespace

std::optional<int64_t> ReadPrivateRss(pid_t pid) {
  const std::string path = pid == 0 ? std::string("/proc/self/statm") : "/proc/" + std::to_string(pid) + "/statm";
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return std::nullopt;
  long long size = 0, resident = 0, shared = 0;
  const int read = std::fscanf(f, "%lld %lld %lld", &size, &resident, &shared);
  std::fclose(f);
  if (read != 3) return std::nullopt;
  static const int64_t page = sysconf(_SC_PAGESIZE);
  return static_cast<int64_t>(resident - shared) * page;
}

TreeUsage ReadTreeUsage() {
  TreeUsage usage;
  const long self = getpid();
  std::multimap<long, ProcStat> by_parent;
  ProcStat own;
  if (ReadStat("self", &own)) {
    usage.cpu_s += own.cpu_s;
    usage.rss_bytes += own.rss_bytes;
  }
  if (DIR* dir = opendir("/proc")) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
      ProcStat stat;
      stat.pid = std::atol(entry->d_name);
      if (ReadStat(entry->d_name, &stat)) by_parent.emplace(stat.ppid, stat);
    }
    closedir(dir);
  }
  // Walk down from this process: children, their children, ...
  std::vector<long> parents = {self};
  while (!parents.empty()) {
    const long parent = parents.back();
    parents.pop_back();
    auto [first, last] = by_parent.equal_range(parent);
    for (auto it = first; it != last; ++it) {
      usage.cpu_s += it->second.cpu_s;
      usage.rss_bytes += it->second.rss_bytes;
      parents.push_back(it->second.pid);
    }
  }
  return usage;
}

}  // namespace feedtune::tuner

#include "tuner/proc_stats.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace feedtune::tuner {
namespace {

// Fields of /proc/PID/stat after the command name: state is field 3 (index 0
// here), ppid 4, utime 14, stime 15, rss 24 (in pages).
bool ReadStat(const std::string& pid, long* ppid, double* cpu_s, int64_t* rss_bytes) {
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
  *ppid = values[1];
  *cpu_s = static_cast<double>(values[11] + values[12]) / ticks;
  *rss_bytes = static_cast<int64_t>(values[21]) * page;
  return true;
}

}  // namespace

TreeUsage ReadTreeUsage() {
  TreeUsage usage;
  const long self = getpid();
  long ppid = 0;
  double cpu = 0;
  int64_t rss = 0;
  if (ReadStat("self", &ppid, &cpu, &rss)) {
    usage.cpu_s += cpu;
    usage.rss_bytes += rss;
  }
  // Workers that have already exited and been reaped count here.
  rusage reaped{};
  if (getrusage(RUSAGE_CHILDREN, &reaped) == 0) {
    usage.cpu_s += static_cast<double>(reaped.ru_utime.tv_sec + reaped.ru_stime.tv_sec) +
                   static_cast<double>(reaped.ru_utime.tv_usec + reaped.ru_stime.tv_usec) / 1e6;
  }
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return usage;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
    if (ReadStat(entry->d_name, &ppid, &cpu, &rss) && ppid == self) {
      usage.cpu_s += cpu;
      usage.rss_bytes += rss;
    }
  }
  closedir(dir);
  return usage;
}

}  // namespace feedtune::tuner

// Processes seen from /proc, for tests: the state, parent and group of a
// process, and the processes under this test process (the fork servers are its
// children, the worker processes theirs).
#pragma once

#include <dirent.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace feedtune::testing_util {

struct ProcStat {
  char state = 0;  // R, S, D, Z (a zombie: nobody reaped it), ...
  pid_t ppid = 0;
  pid_t pgrp = 0;
};

// Fields 3-5 of /proc/PID/stat; nullopt when the process is gone.
inline std::optional<ProcStat> ReadProcStat(pid_t pid) {
  // getline, not istreambuf_iterator: a process that exits between the open
  // and the read makes read() fail with ESRCH, and libstdc++'s underflow throws
  // that through the iterator; getline turns it into a failed read.
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const size_t close = stat.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return std::nullopt;
  ProcStat s;
  int ppid = 0, pgrp = 0;
  if (std::sscanf(stat.c_str() + close + 2, "%c %d %d", &s.state, &ppid, &pgrp) != 3) return std::nullopt;
  s.ppid = ppid;
  s.pgrp = pgrp;
  return s;
}

// Every process in /proc now.
inline std::vector<pid_t> AllPids() {
  std::vector<pid_t> pids;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return pids;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] >= '1' && e->d_name[0] <= '9') pids.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
  }
  closedir(dir);
  return pids;
}

// Children of `parent`, zombies included.
inline std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> children;
  for (const pid_t pid : AllPids()) {
    if (const auto stat = ReadProcStat(pid); stat && stat->ppid == parent) children.push_back(pid);
  }
  return children;
}

// Worker processes: the grandchildren of this process.
inline int CountWorkerProcesses() {
  int count = 0;
  for (const pid_t child : ChildrenOf(getpid())) count += static_cast<int>(ChildrenOf(child).size());
  return count;
}

}  // namespace feedtune::testing_util

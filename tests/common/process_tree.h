// The processes under this test process, from /proc: the fork servers are its
// children, and the worker processes are theirs.
#pragma once

#include <dirent.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace feedtune::testing_util {

// Children of `parent`, zombies included (a zombie is a process nobody reaped).
inline std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> children;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return children;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    std::ifstream in("/proc/" + std::string(e->d_name) + "/stat");
    const std::string stat((std::istreambuf_iterator<char>(in)), {});
    const size_t close = stat.rfind(')');  // the command name may hold spaces
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(stat.c_str() + close + 2, "%c %d", &state, &ppid) == 2 && ppid == parent) {
      children.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
    }
  }
  closedir(dir);
  return children;
}

// Worker processes: the grandchildren of this process.
inline int CountWorkerProcesses() {
  int count = 0;
  for (const pid_t child : ChildrenOf(getpid())) count += static_cast<int>(ChildrenOf(child).size());
  return count;
}

// Every process under this one (fork servers and workers).
inline int CountDescendants() {
  int count = 0;
  std::vector<pid_t> parents = {getpid()};
  while (!parents.empty()) {
    const pid_t parent = parents.back();
    parents.pop_back();
    for (const pid_t child : ChildrenOf(parent)) {
      ++count;
      parents.push_back(child);
    }
  }
  return count;
}

}  // namespace feedtune::testing_util

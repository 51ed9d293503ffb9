#include "tuner/measure/cpu_affinity.h"

#include <dirent.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <sstream>
#include <system_error>

namespace feedtune::tuner::node {
namespace {

// A small text file (a sysfs value), its trailing newline and blanks cut; empty when unreadable.
std::string ReadSmallFile(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return {};
  char buf[4096];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  std::string text(buf, n);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

// A thread that ends meanwhile is no error.
void BindTrialCpus(const std::vector<int>& cpus, pid_t fork_server, loader::CpuBinding binding) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  const std::string what = std::string("sched_setaffinity for cpu_binding ") + loader::CpuBindingName(binding);
  if (sched_setaffinity(0, sizeof set, &set) != 0) throw std::system_error(errno, std::generic_category(), what);
  if (DIR* dir = opendir("/proc/self/task")) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] == '.') continue;
      sched_setaffinity(static_cast<pid_t>(std::atoi(entry->d_name)), sizeof set, &set);
    }
    closedir(dir);
  }
  if (fork_server > 0 && sched_setaffinity(fork_server, sizeof set, &set) != 0 && errno != ESRCH) {
    throw std::system_error(errno, std::generic_category(), what + " of the fork server");
  }
}

std::vector<int> SplitShare(const std::vector<int>& cpus, int rank, int ranks) {
  const size_t n = cpus.size();
  if (n == 0 || ranks < 1) return {};
  if (static_cast<size_t>(ranks) > n) return {cpus[static_cast<size_t>(rank) % n]};
  const size_t begin = static_cast<size_t>(rank) * n / static_cast<size_t>(ranks);
  const size_t end = static_cast<size_t>(rank + 1) * n / static_cast<size_t>(ranks);
  return std::vector<int>(cpus.begin() + static_cast<std::ptrdiff_t>(begin),
                          cpus.begin() + static_cast<std::ptrdiff_t>(end));
}

std::vector<int> AffinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

std::vector<int> ParseCpuList(const std::string& list) {
  std::vector<int> cpus;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) continue;
    const auto dash = item.find('-');
    try {
      const int lo = std::stoi(item.substr(0, dash));
      const int hi = dash == std::string::npos ? lo : std::stoi(item.substr(dash + 1));
      for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    } catch (const std::exception&) {
      return {};  // not a CPU list: unknown
    }
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::vector<int> GpuNumaNodes(const SweepConfig& config, int ranks) {
  std::vector<int> nodes(static_cast<size_t>(std::max(0, ranks)), -1);
  if (config.device.backend == device::BackendChoice::kHostSim) return nodes;
  std::vector<std::string> bus_ids;
  if (DIR* dir = opendir("/proc/driver/nvidia/gpus")) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] != '.') bus_ids.emplace_back(entry->d_name);
    }
    closedir(dir);
  }
  std::sort(bus_ids.begin(), bus_ids.end());
  std::vector<std::string> visible;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v != nullptr) {
    std::stringstream list(v);
    for (std::string item; std::getline(list, item, ',');) visible.push_back(item);
  }
  for (int r = 0; r < ranks; ++r) {
    int index = r;
    if (!visible.empty()) {
      if (static_cast<size_t>(r) >= visible.size()) continue;
      try {
        size_t used = 0;
        index = std::stoi(visible[static_cast<size_t>(r)], &used);
        if (used != visible[static_cast<size_t>(r)].size()) continue;  // a UUID: its bus id is not known here
      } catch (const std::exception&) {
        continue;
      }
    }
    if (index < 0 || static_cast<size_t>(index) >= bus_ids.size()) continue;
    // /proc names the bus id's domain with 4 digits, sysfs too, in lower case.
    std::string bus = bus_ids[static_cast<size_t>(index)];
    std::transform(bus.begin(), bus.end(), bus.begin(), [](unsigned char c) { return std::tolower(c); });
    const std::string text = ReadSmallFile("/sys/bus/pci/devices/" + bus + "/numa_node");
    try {
      if (!text.empty()) nodes[static_cast<size_t>(r)] = std::stoi(text);
    } catch (const std::exception&) {
    }
  }
  return nodes;
}

std::vector<int> NumaShare(const std::vector<int>& cpus, int rank, const std::vector<int>& gpu_nodes) {
  if (rank < 0 || static_cast<size_t>(rank) >= gpu_nodes.size() || gpu_nodes[static_cast<size_t>(rank)] < 0) {
    return {};
  }
  const int node = gpu_nodes[static_cast<size_t>(rank)];
  const std::vector<int> on_node =
      ParseCpuList(ReadSmallFile("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist"));
  std::vector<int> usable;
  std::set_intersection(cpus.begin(), cpus.end(), on_node.begin(), on_node.end(), std::back_inserter(usable));
  if (usable.empty()) return {};
  int peers = 0, index = 0;
  for (size_t r = 0; r < gpu_nodes.size(); ++r) {
    if (gpu_nodes[r] != node) continue;
    if (static_cast<int>(r) == rank) index = peers;
    ++peers;
  }
  return SplitShare(usable, index, peers);
}

std::vector<int> BindingCpus(loader::CpuBinding binding, const std::vector<int>& usable, int rank, int ranks,
                             const std::vector<int>& gpu_nodes, std::string* note) {
  if (note != nullptr) note->clear();
  switch (binding) {
    case loader::CpuBinding::kNone:
      return usable;
    case loader::CpuBinding::kSplit:
      return SplitShare(usable, rank, ranks);
    case loader::CpuBinding::kNuma: {
      std::vector<int> share = NumaShare(usable, rank, gpu_nodes);
      if (!share.empty()) return share;
      if (note != nullptr) {
        *note = "cpu_binding numa: the NUMA node of rank " + std::to_string(rank) +
                "'s GPU is unknown (host-sim, or no /sys/bus/pci/devices/<gpu>/numa_node) or has none of the "
                "usable CPUs; bound as split";
      }
      return SplitShare(usable, rank, ranks);
    }
  }
  return usable;
}

}  // namespace feedtune::tuner::node

#include "tuner/measure/proc_stats.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace feedtune::tuner {
namespace {

struct ProcStat {
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

TreeUsage ReadTreeUsage(pid_t root) {
  TreeUsage usage;
  const long top = root == 0 ? static_cast<long>(getpid()) : static_cast<long>(root);
  ProcStat own;
  if (ReadStat(root == 0 ? std::string("self") : std::to_string(root), &own)) {
    usage.cpu_s += own.cpu_s;
    usage.rss_bytes += own.rss_bytes;
  }
  ForEachDescendant<ProcStat>(top, ReadStat, [&usage](const ProcStat& stat) {
    usage.cpu_s += stat.cpu_s;
    usage.rss_bytes += stat.rss_bytes;
  });
  return usage;
}

namespace {

std::optional<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string JoinPath(const std::string& root, const std::string& path) {
  return (std::filesystem::path(root) / std::filesystem::path(path).relative_path()).string();
}

// This process's cgroup path in the hierarchy `line` describes: v2's "0::/x"
// when `v1_controller` is empty, else the v1 line listing that controller.
std::string CgroupPath(std::string_view text, std::string_view v1_controller) {
  std::istringstream lines{std::string(text)};
  std::string line;
  while (std::getline(lines, line)) {
    const size_t first = line.find(':');
    const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    bool match = false;
    if (v1_controller.empty()) {
      match = controllers.empty() && line.substr(0, first) == "0";
    } else {
      std::istringstream names(controllers);
      std::string name;
      while (std::getline(names, name, ',')) match = match || name == v1_controller;
    }
    if (match) return line.substr(second + 1);
  }
  return "";
}

// Whether `dir` or a folder above it up to `mount` sets a CPU quota.
bool HasQuota(const std::string& mount, const std::string& relative, bool v2) {
  std::filesystem::path path = std::filesystem::path(relative).relative_path().lexically_normal();
  while (true) {
    const std::string dir = (std::filesystem::path(mount) / path).string();
    if (v2) {
      const auto text = ReadWhole(dir + "/cpu.max");
      if (text && !text->starts_with("max")) return true;
    } else {
      const auto text = ReadWhole(dir + "/cpu.cfs_quota_us");
      if (text && std::atol(text->c_str()) > 0) return true;
    }
    if (path.empty() || path == ".") return false;
    path = path.parent_path();
  }
}

}  // namespace

BoxCpuSource FindBoxCpuSource(const std::string& root) {
  const BoxCpuSource box{JoinPath(root, "/proc/stat"), false};
  const auto cgroups = ReadWhole(JoinPath(root, "/proc/self/cgroup"));
  if (!cgroups) return box;
  // The root cgroup ("/") holds the whole box: /proc/stat says the same.
  if (const std::string v2 = CgroupPath(*cgroups, ""); !v2.empty() && v2 != "/") {
    const std::string mount = JoinPath(root, "/sys/fs/cgroup");
    const std::string stat = JoinPath(mount, v2) + "/cpu.stat";
    if (std::filesystem::exists(stat) && HasQuota(mount, v2, true)) return {stat, true};
  }
  for (const char* controller : {"cpuacct", "cpu"}) {
    const std::string v1 = CgroupPath(*cgroups, controller);
    if (v1.empty() || v1 == "/") continue;
    for (const char* mount : {"/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpuacct,cpu"}) {
      const std::string dir = JoinPath(JoinPath(root, mount), v1);
      if (!std::filesystem::exists(dir + "/cpuacct.usage")) continue;
      if (HasQuota(JoinPath(root, mount), v1, false)) return {dir + "/cpuacct.usage", true};
    }
  }
  return box;
}

std::optional<double> ParseProcStatBusy(std::string_view text, double ticks_per_s) {
  std::istringstream lines{std::string(text)};
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with("cpu ")) continue;
    std::istringstream fields(line.substr(4));
    // user nice system idle iowait irq softirq steal (guest is inside user).
    double v[8] = {};
    int n = 0;
    while (n < 8 && fields >> v[n]) ++n;
    if (n < 4 || !(ticks_per_s > 0)) return std::nullopt;
    const double busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    return busy / ticks_per_s;
  }
  return std::nullopt;
}

std::optional<double> ParseCgroupUsage(std::string_view text) {
  std::istringstream lines{std::string(text)};
  std::string line;
  std::optional<double> single;
  int count = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    ++count;
    if (line.starts_with("usage_usec ")) return std::atof(line.c_str() + 11) / 1e6;
    char* end = nullptr;
    const double ns = std::strtod(line.c_str(), &end);
    if (end != line.c_str() && *end == '\0') single = ns / 1e9;
  }
  return count == 1 ? single : std::nullopt;
}

std::optional<double> ReadBoxBusy(const BoxCpuSource& source) {
  const auto text = ReadWhole(source.path);
  if (!text) return std::nullopt;
  if (source.cgroup) return ParseCgroupUsage(*text);
  static const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  return ParseProcStatBusy(*text, ticks);
}

double BackgroundCpu(const CpuReading& before, const CpuReading& after) {
  const double wall = after.wall_s - before.wall_s;
  if (!(wall > 0)) return std::nan("");
  const double others = (after.box_busy_s - before.box_busy_s) - (after.tree_cpu_s - before.tree_cpu_s);
  return std::max(0.0, others / wall);
}

std::vector<ProcessTimes> ReadProcessTimes() {
  std::vector<ProcessTimes> processes;
  static const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return processes;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
    std::ifstream in(std::string("/proc/") + entry->d_name + "/stat");
    std::string line;
    if (!std::getline(in, line)) continue;
    const auto open = line.find('(');
    const auto close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    ProcessTimes p;
    p.pid = std::atol(entry->d_name);
    p.name = line.substr(open + 1, close - open - 1);
    std::istringstream fields(line.substr(close + 2));
    std::string f;
    long values[13] = {};
    for (int i = 0; i < 13 && fields >> f; ++i) values[i] = i == 0 ? 0 : std::atol(f.c_str());
    // After the name: state, ppid, ..., utime (index 11), stime (12).
    p.ppid = values[1];
    p.cpu_s = static_cast<double>(values[11] + values[12]) / ticks;
    processes.push_back(std::move(p));
  }
  closedir(dir);
  return processes;
}

std::vector<int64_t> TreePids(const std::vector<ProcessTimes>& processes, int64_t root) {
  std::multimap<int64_t, int64_t> children;
  for (const ProcessTimes& p : processes) children.emplace(p.ppid, p.pid);
  std::vector<int64_t> tree = {root};
  for (size_t i = 0; i < tree.size(); ++i) {
    auto [first, last] = children.equal_range(tree[i]);
    for (auto it = first; it != last; ++it) tree.push_back(it->second);
  }
  return tree;
}

std::vector<results::ProcessCpu> TopConsumers(const std::vector<ProcessTimes>& before,
                                              const std::vector<ProcessTimes>& after, double wall_s,
                                              const std::vector<int64_t>& exclude, size_t count) {
  std::map<int64_t, double> start;
  for (const ProcessTimes& p : before) start[p.pid] = p.cpu_s;
  std::map<std::string, results::ProcessCpu> by_name;
  for (const ProcessTimes& p : after) {
    if (std::find(exclude.begin(), exclude.end(), p.pid) != exclude.end()) continue;
    const auto it = start.find(p.pid);
    // A pid reused by another process reads less than it did: count it from 0.
    const double was = it != start.end() && it->second <= p.cpu_s ? it->second : 0;
    const double took = (p.cpu_s - was) / wall_s;
    if (!(took > 0)) continue;
    auto [entry, fresh] = by_name.try_emplace(p.name);
    results::ProcessCpu& c = entry->second;
    if (fresh) {
      c = {p.name, p.pid, 1, took};
    } else {
      ++c.processes;
      c.cpu += took;
    }
  }
  std::vector<results::ProcessCpu> top;
  for (auto& [name, c] : by_name) {
    if (c.cpu >= 0.01) top.push_back(std::move(c));
  }
  std::sort(top.begin(), top.end(), [](const results::ProcessCpu& a, const results::ProcessCpu& b) {
    return a.cpu != b.cpu ? a.cpu > b.cpu : a.name < b.name;
  });
  if (top.size() > count) top.resize(count);
  return top;
}

std::optional<CpuReading> BackgroundMeter::Read() const {
  TreeUsage usage;
  return Read(&usage);
}

std::optional<CpuReading> BackgroundMeter::Read(TreeUsage* usage) const {
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::time_point t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); };
  // The box read on both sides of the tree, so the reading is of one moment.
  const auto t0 = Clock::now();
  const std::optional<double> box_before = ReadBoxBusy(source_);
  *usage = ReadTreeUsage(tree_root_);
  const std::optional<double> box_after = ReadBoxBusy(source_);
  const auto t1 = Clock::now();
  if (!box_before || !box_after) return std::nullopt;
  return CpuReading{(*box_before + *box_after) / 2, usage->cpu_s, (seconds(t0) + seconds(t1)) / 2};
}

BackgroundSample SampleBackground(double seconds, const std::atomic<bool>* stop, size_t top) {
  BackgroundSample sample;
  sample.source = FindBoxCpuSource();
  sample.cpu = std::nan("");
  const BackgroundMeter meter(sample.source);
  const std::vector<ProcessTimes> before = ReadProcessTimes();
  const std::optional<CpuReading> start = meter.Read();
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const std::optional<CpuReading> end = meter.Read();
  const std::vector<ProcessTimes> after = ReadProcessTimes();
  if (!start || !end) return sample;
  sample.seconds = end->wall_s - start->wall_s;
  sample.cpu = BackgroundCpu(*start, *end);
  sample.top = TopConsumers(before, after, sample.seconds, TreePids(after, getpid()), top);
  return sample;
}

}  // namespace feedtune::tuner

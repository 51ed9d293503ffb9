#include "results/fingerprint.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string_view>
#include <system_error>
#include <vector>

namespace feedtune::results {
namespace {

namespace fs = std::filesystem;

// cgroup v1 reports "no limit" as a page-rounded INT64_MAX; anything this large
// is no limit in practice.
constexpr int64_t kNoMemoryLimitAbove = int64_t{1} << 60;

std::string Join(const std::string& root, std::string_view relative) {
  return (root.empty() ? std::string("/") : root + "/") + std::string(relative);
}

std::optional<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return text.str();
}

std::string_view Trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n";
  const size_t begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  const size_t end = text.find_last_not_of(kSpace);
  return text.substr(begin, end - begin + 1);
}

std::optional<int64_t> ParseInt(std::string_view text) {
  text = Trim(text);
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) {
    return std::nullopt;
  }
  return value;
}

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    lines.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  while (true) {
    const size_t end = text.find(separator);
    parts.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return parts;
}

std::vector<std::string_view> Words(std::string_view text) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    const size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t') ++i;
    if (i > start) words.push_back(text.substr(start, i - start));
  }
  return words;
}

std::string FirstLine(const std::string& path) {
  const auto text = ReadText(path);
  if (!text) return {};
  return std::string(Trim(text->substr(0, text->find('\n'))));
}

struct CpuInfo {
  std::string model;
  int processors = 0;
};

// x86 names the CPU in "model name"; older ARM kernels use "Hardware" and MIPS
// "cpu model". The first match in that order wins.
CpuInfo ParseCpuInfo(std::string_view text) {
  CpuInfo info;
  std::string model_name;
  std::string hardware;
  std::string cpu_model;
  for (std::string_view line : Lines(text)) {
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = Trim(line.substr(0, colon));
    const std::string_view value = Trim(line.substr(colon + 1));
    if (key == "processor") {
      ++info.processors;
    } else if (key == "model name" && model_name.empty()) {
      model_name = value;
    } else if (key == "Hardware" && hardware.empty()) {
      hardware = value;
    } else if (key == "cpu model" && cpu_model.empty()) {
      cpu_model = value;
    }
  }
  info.model = !model_name.empty() ? model_name : !hardware.empty() ? hardware : cpu_model;
  return info;
}

// Counts a kernel CPU list such as "0-3,8,10-11".
int CountCpuList(std::string_view text) {
  int count = 0;
  for (std::string_view part : Split(Trim(text), ',')) {
    part = Trim(part);
    if (part.empty()) continue;
    const size_t dash = part.find('-');
    const auto first = ParseInt(part.substr(0, dash));
    const auto last = dash == std::string_view::npos ? first : ParseInt(part.substr(dash + 1));
    if (first && last && *last >= *first) count += static_cast<int>(*last - *first + 1);
  }
  return count;
}

int LiveAffinityCount() {
  // The mask can be wider than cpu_set_t on very large machines; grow until it fits.
  for (int cpus = 1024; cpus <= (1 << 20); cpus *= 2) {
    std::unique_ptr<cpu_set_t, void (*)(cpu_set_t*)> set(CPU_ALLOC(cpus),
                                                         [](cpu_set_t* s) { CPU_FREE(s); });
    if (!set) return 0;
    const size_t size = CPU_ALLOC_SIZE(cpus);
    CPU_ZERO_S(size, set.get());
    if (sched_getaffinity(0, size, set.get()) == 0) return CPU_COUNT_S(size, set.get());
    if (errno != EINVAL) return 0;
  }
  return 0;
}

// The folders whose limits apply to this process in one cgroup hierarchy:
// its own cgroup (from proc/self/cgroup) and every ancestor up to the mount
// point, leaf first. A limit set on any of them applies, so callers take the
// smallest. Without a cgroup namespace the listed path is the host's and does
// not exist under the container's mount; walking up then ends at the mount,
// which is the container's own cgroup.
std::vector<std::string> CgroupDirs(const std::string& root, const std::string& mount,
                                    std::string_view v1_controller) {
  std::string relative;
  if (const auto text = ReadText(Join(root, "proc/self/cgroup"))) {
    for (std::string_view line : Lines(*text)) {
      // Format: "hierarchy-id:controller,list:/path"; v2 is "0::/path".
      const size_t first = line.find(':');
      const size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
      if (second == std::string_view::npos) continue;
      const std::string_view controllers = line.substr(first + 1, second - first - 1);
      const bool match = v1_controller.empty()
                             ? controllers.empty() && line.substr(0, first) == "0"
                             : std::ranges::count(Split(controllers, ','), v1_controller) > 0;
      if (match) {
        relative = std::string(Trim(line.substr(second + 1)));
        break;
      }
    }
  }
  std::vector<std::string> dirs;
  fs::path path = fs::path(relative).relative_path().lexically_normal();
  // A path outside our view of the hierarchy ("/../x") cannot be followed.
  if (!path.empty() && *path.begin() == "..") path.clear();
  while (!path.empty() && path != ".") {
    dirs.push_back(mount + "/" + path.string());
    path = path.parent_path();
  }
  dirs.push_back(mount);
  return dirs;
}

// CPUs allowed by the CPU quota (cgroup v2 cpu.max, else v1 CFS quota); 0 = none.
double ReadCpuLimit(const std::string& root) {
  double limit = 0;
  bool found = false;
  const auto take = [&limit](double value) {
    if (value > 0 && (limit == 0 || value < limit)) limit = value;
  };
  for (const std::string& dir : CgroupDirs(root, Join(root, "sys/fs/cgroup"), "")) {
    const auto text = ReadText(dir + "/cpu.max");
    if (!text) continue;
    found = true;
    const auto words = Words(Trim(*text));  // "max 100000" or "150000 100000"
    if (words.size() != 2) continue;
    const auto quota = ParseInt(words[0]);
    const auto period = ParseInt(words[1]);
    if (quota && period && *period > 0) take(static_cast<double>(*quota) / *period);
  }
  if (found) return limit;

  for (const char* mount :
       {"sys/fs/cgroup/cpu", "sys/fs/cgroup/cpu,cpuacct", "sys/fs/cgroup/cpuacct,cpu"}) {
    const std::string mount_path = Join(root, mount);
    std::error_code error;
    if (!fs::is_directory(mount_path, error)) continue;
    for (const std::string& dir : CgroupDirs(root, mount_path, "cpu")) {
      const auto quota = ParseInt(FirstLine(dir + "/cpu.cfs_quota_us"));
      const auto period = ParseInt(FirstLine(dir + "/cpu.cfs_period_us"));
      // A quota of -1 means none.
      if (quota && period && *quota > 0 && *period > 0) {
        take(static_cast<double>(*quota) / *period);
      }
    }
    break;
  }
  return limit;
}

// Bytes allowed by the cgroup memory limit (v2 memory.max, else v1); 0 = none.
int64_t ReadMemoryLimit(const std::string& root) {
  int64_t limit = 0;
  bool found = false;
  const auto take = [&limit](std::optional<int64_t> value) {
    if (value && *value > 0 && *value < kNoMemoryLimitAbove && (limit == 0 || *value < limit)) {
      limit = *value;
    }
  };
  for (const std::string& dir : CgroupDirs(root, Join(root, "sys/fs/cgroup"), "")) {
    const auto text = ReadText(dir + "/memory.max");
    if (!text) continue;
    found = true;
    take(ParseInt(*text));  // "max" does not parse: no limit
  }
  if (found) return limit;

  const std::string mount = Join(root, "sys/fs/cgroup/memory");
  for (const std::string& dir : CgroupDirs(root, mount, "memory")) {
    take(ParseInt(FirstLine(dir + "/memory.limit_in_bytes")));
  }
  return limit;
}

// The "oom_kill N" line of a memory.events or memory.oom_control file.
std::optional<int64_t> OomKillField(const std::string& text) {
  for (std::string_view line : Lines(text)) {
    const auto words = Words(line);
    if (words.size() == 2 && words[0] == "oom_kill") return ParseInt(words[1]);
  }
  return std::nullopt;
}

// For fixtures, which have no affinity mask to ask: the cgroup's effective cpuset.
int ReadCpusetCount(const std::string& root) {
  for (const std::string& dir : CgroupDirs(root, Join(root, "sys/fs/cgroup"), "")) {
    if (const auto text = ReadText(dir + "/cpuset.cpus.effective")) return CountCpuList(*text);
  }
  for (const std::string& dir : CgroupDirs(root, Join(root, "sys/fs/cgroup/cpuset"), "cpuset")) {
    if (const auto text = ReadText(dir + "/cpuset.effective_cpus")) return CountCpuList(*text);
  }
  return 0;
}

int CountNumaNodes(const std::string& root) {
  int nodes = 0;
  std::error_code error;
  for (fs::directory_iterator it(Join(root, "sys/devices/system/node"), error), end;
       !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.size() > 4 && name.starts_with("node") &&
        std::all_of(name.begin() + 4, name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      ++nodes;
    }
  }
  // Kernels built without NUMA have no node folder: that is one node.
  return std::max(nodes, 1);
}

int64_t ReadMemTotal(const std::string& root) {
  const auto text = ReadText(Join(root, "proc/meminfo"));
  if (!text) return 0;
  for (std::string_view line : Lines(*text)) {
    if (!line.starts_with("MemTotal:")) continue;
    const auto words = Words(line.substr(9));  // "16384256 kB"
    if (words.empty()) return 0;
    const auto value = ParseInt(words[0]);
    const bool kib = words.size() > 1 && words[1] == "kB";
    return value ? *value * (kib ? 1024 : 1) : 0;
  }
  return 0;
}

int64_t ReadShmBytes(const std::string& root) {
  struct statvfs info {};
  if (statvfs(Join(root, "dev/shm").c_str(), &info) != 0) return 0;
  return static_cast<int64_t>(info.f_blocks) * static_cast<int64_t>(info.f_frsize);
}

int64_t ReadNofileLimit(const std::string& root) {
  if (root.empty()) {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
    if (limit.rlim_cur == RLIM_INFINITY) return std::numeric_limits<int64_t>::max();
    return static_cast<int64_t>(limit.rlim_cur);
  }
  const auto text = ReadText(Join(root, "proc/self/limits"));
  if (!text) return 0;
  for (std::string_view line : Lines(*text)) {
    if (!line.starts_with("Max open files")) continue;
    const auto words = Words(line);  // Max open files <soft> <hard> files
    if (words.size() < 4) return 0;
    if (words[3] == "unlimited") return std::numeric_limits<int64_t>::max();
    return ParseInt(words[3]).value_or(0);
  }
  return 0;
}

// FNV-1a, 64 bit: tiny, stable across platforms and versions, and collisions
// are irrelevant at the scale of "machines one person owns".
uint64_t Fnv1a(std::string_view text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

}  // namespace

std::string Fingerprint::Hash() const {
  // Only what decides a sweep's answer: a renamed host or an upgraded kernel is
  // the same machine, a changed cgroup quota or GPU is not. Field names keep
  // "a" + "bc" apart from "ab" + "c".
  char limit[32];
  std::snprintf(limit, sizeof(limit), "%.6g", cgroup_cpu_limit);
  std::string canonical;
  canonical += "cpu_model=" + cpu_model + "\n";
  canonical += "logical_cpus=" + std::to_string(logical_cpus) + "\n";
  canonical += "usable_cpus=" + std::to_string(usable_cpus) + "\n";
  canonical += "numa_nodes=" + std::to_string(numa_nodes) + "\n";
  canonical += "mem_total_bytes=" + std::to_string(mem_total_bytes) + "\n";
  canonical += "cgroup_cpu_limit=" + std::string(limit) + "\n";
  canonical += "cgroup_mem_limit_bytes=" + std::to_string(cgroup_mem_limit_bytes) + "\n";
  canonical += "gpu_name=" + gpu_name + "\n";
  canonical += "gpu_count=" + std::to_string(gpu_count) + "\n";
  canonical += "gpu_mem_bytes=" + std::to_string(gpu_mem_bytes) + "\n";
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(Fnv1a(canonical)));
  return hex;
}

HostIdentity HostOf(const Fingerprint& fingerprint) {
  HostIdentity host;
  host.name = fingerprint.label.empty() ? fingerprint.hostname : fingerprint.label;
  host.hostname = fingerprint.hostname;
  host.machine_id = fingerprint.machine_id;
  return host;
}

void SetGpus(Fingerprint* fingerprint, const std::vector<GpuInfo>& gpus) {
  Fingerprint& f = *fingerprint;
  f.gpus = gpus;
  f.gpu_count = static_cast<int>(gpus.size());
  if (gpus.empty()) {
    f.gpu_name.clear();
    f.gpu_mem_bytes = 0;
    f.gpu_driver.clear();
    f.gpu_runtime.clear();
    f.pcie_link.clear();
    return;
  }
  const GpuInfo& first = gpus.front();
  // Mixed boxes exist; the summary says so rather than naming only GPU 0.
  const bool mixed = std::any_of(gpus.begin(), gpus.end(),
                                 [&first](const GpuInfo& g) { return g.name != first.name; });
  f.gpu_name = mixed ? first.name + " (+ other models)" : first.name;
  f.gpu_mem_bytes = first.mem_bytes;
  f.gpu_driver = first.driver;
  f.gpu_runtime = first.runtime;
  f.pcie_link = first.link;
}

Fingerprint ReadFingerprint(const std::string& root) {
  const bool live = root.empty();
  Fingerprint f;

  if (live) {
    char name[HOST_NAME_MAX + 1] = {};
    if (gethostname(name, sizeof(name) - 1) == 0) f.hostname = name;
  } else {
    f.hostname = FirstLine(Join(root, "etc/hostname"));
    if (f.hostname.empty()) f.hostname = FirstLine(Join(root, "proc/sys/kernel/hostname"));
  }

  const CpuInfo cpu = ParseCpuInfo(ReadText(Join(root, "proc/cpuinfo")).value_or(""));
  f.cpu_model = cpu.model;
  utsname uts{};
  const bool have_uts = live && uname(&uts) == 0;
  if (f.cpu_model.empty()) f.cpu_model = have_uts ? uts.machine : "unknown";

  f.logical_cpus = cpu.processors;
  if (f.logical_cpus == 0 && live) f.logical_cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  f.logical_cpus = std::max(f.logical_cpus, 1);

  f.usable_cpus = live ? LiveAffinityCount() : ReadCpusetCount(root);
  if (f.usable_cpus <= 0) f.usable_cpus = f.logical_cpus;
  f.cgroup_cpu_limit = ReadCpuLimit(root);
  if (f.cgroup_cpu_limit > 0) {
    // A quota of 1.5 CPUs still lets two threads run at once, so round up.
    f.usable_cpus = std::min(f.usable_cpus, static_cast<int>(std::ceil(f.cgroup_cpu_limit)));
  }
  f.usable_cpus = std::max(f.usable_cpus, 1);

  f.numa_nodes = CountNumaNodes(root);
  f.mem_total_bytes = ReadMemTotal(root);
  f.cgroup_mem_limit_bytes = ReadMemoryLimit(root);
  f.shm_bytes = ReadShmBytes(root);
  f.nofile_limit = ReadNofileLimit(root);
  f.kernel =
      have_uts ? std::string(uts.release) : FirstLine(Join(root, "proc/sys/kernel/osrelease"));
  // systemd's, else D-Bus's older copy; containers often have neither.
  f.machine_id = FirstLine(Join(root, "etc/machine-id"));
  if (f.machine_id.empty()) f.machine_id = FirstLine(Join(root, "var/lib/dbus/machine-id"));
  return f;
}

std::optional<OomKills> ReadOomKills(const std::string& root) {
  // The leaf first: its count is this process's own cgroup's (an ancestor's
  // counts its other children too).
  for (const std::string& dir : CgroupDirs(root, Join(root, "sys/fs/cgroup"), "")) {
    const std::string file = dir + "/memory.events";
    if (const auto text = ReadText(file)) {
      if (const auto count = OomKillField(*text)) return OomKills{*count, file};
    }
  }
  const std::string mount = Join(root, "sys/fs/cgroup/memory");
  for (const std::string& dir : CgroupDirs(root, mount, "memory")) {
    const std::string file = dir + "/memory.oom_control";
    if (const auto text = ReadText(file)) {
      if (const auto count = OomKillField(*text)) return OomKills{*count, file};
    }
  }
  return std::nullopt;
}

}  // namespace feedtune::results

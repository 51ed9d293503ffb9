#include "workloads/format_io.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "workloads/shard_format.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <system_error>

namespace feedtune::workloads {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.Release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

FileMapping::FileMapping(int fd, uint64_t offset, size_t length) {
  static const long page = sysconf(_SC_PAGESIZE);  // constant for the process's life
  const uint64_t aligned = offset / static_cast<uint64_t>(page) * static_cast<uint64_t>(page);
  skip_ = static_cast<size_t>(offset - aligned);
  size_ = length + skip_;
  if (size_ == 0) return;
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(aligned));
  if (p == MAP_FAILED) {
    error_ = errno;
    size_ = 0;
    return;
  }
  base_ = static_cast<const std::byte*>(p);
}

FileMapping::~FileMapping() {
  if (base_ != nullptr) ::munmap(const_cast<std::byte*>(base_), size_);
}

std::string ErrnoText(int error) { return std::generic_category().message(error); }

size_t PreadFull(int fd, std::span<std::byte> out, uint64_t offset, int* error) {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = errno;
      return done;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

void WriteFull(int fd, const std::string& path, std::span<const std::byte> data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(path + ": write failed: " + ErrnoText(errno));
    done += static_cast<size_t>(n);
  }
}

int64_t ResidentBytes(int fd, int64_t size) {
  if (size <= 0) return 0;
  const long page = sysconf(_SC_PAGESIZE);
  void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return 0;
  std::vector<unsigned char> pages(static_cast<size_t>((size + page - 1) / page));
  int64_t resident = 0;
  if (::mincore(p, static_cast<size_t>(size), pages.data()) == 0) {
    for (unsigned char v : pages) resident += (v & 1) ? page : 0;
  }
  ::munmap(p, static_cast<size_t>(size));
  return std::min(resident, size);
}

loader::RepeatPreparation EvictFromPageCache(const std::vector<std::string>& paths) {
  int64_t total = 0, resident = 0, failures = 0;
  for (const std::string& path : paths) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED) != 0) {
      ++failures;
      continue;
    }
    total += st.st_size;
    resident += ResidentBytes(fd.get(), st.st_size);
  }
  const double stayed = total > 0 ? static_cast<double>(resident) / static_cast<double>(total) : 0;
  return {CacheColdNote(static_cast<double>(total), paths.size(), stayed, failures),
          total > 0 ? std::optional<double>(stayed) : std::nullopt};
}

std::string CacheColdNote(double bytes, size_t files, double stayed, int64_t failures) {
  char share[32];
  std::snprintf(share, sizeof share, "%.0f%%", stayed * 100);
  std::string note = "cache cold: " + FormatMegabytes(bytes) + " in " + std::to_string(files) +
                     (files == 1 ? " file" : " files") +
                     " evicted from the page cache before each repeat (posix_fadvise DONTNEED); " + share +
                     " stayed resident";
  if (stayed > 0.5) {
    note += " (pages on a memory-backed file system such as tmpfs, or mapped by a running process such as a "
            "persistent worker, cannot be evicted: those reads are warm)";
  }
  if (failures > 0) note += "; " + std::to_string(failures) + " could not be evicted";
  return note;
}

std::string FileSystemType(const std::string& path, bool* network) {
  *network = false;
  struct statfs fs {};
  if (::statfs(path.c_str(), &fs) != 0) return "unknown (" + ErrnoText(errno) + ")";
  // Magic numbers from linux/magic.h and the file systems' own headers.
  struct Known {
    unsigned long magic;
    const char* name;
    bool network;
  };
  static constexpr Known kKnown[] = {
      {0xEF53, "ext4", false},        {0x58465342, "xfs", false},       {0x9123683E, "btrfs", false},
      {0x01021994, "tmpfs", false},   {0x794C7630, "overlayfs", false}, {0x2FC12FC1, "zfs", false},
      {0x6969, "nfs", true},          {0xFF534D42, "cifs", true},       {0xFE534D42, "smb2", true},
      {0x0BD00BD0, "lustre", true},   {0x47504653, "gpfs", true},       {0x00C36400, "cephfs", true},
      {0x65735546, "fuse", true},     {0x5346414F, "afs", true},        {0x858458F6, "ramfs", false},
  };
  const auto magic = static_cast<unsigned long>(fs.f_type);
  for (const Known& k : kKnown) {
    if (k.magic == magic) {
      *network = k.network;
      return k.name;
    }
  }
  char hex[32];
  std::snprintf(hex, sizeof hex, "unknown (0x%lx)", magic);
  return hex;
}

namespace {

// The file system type /proc/self/mountinfo gives the mount holding `path`
// ("fuse.mountpoint-s3", "nfs4"): the longest mount point that prefixes it.
std::string MountType(const std::string& path) {
  std::error_code ec;
  const std::string absolute = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec).string();
  std::ifstream mounts("/proc/self/mountinfo");
  std::string line, best_point, best_type;
  while (std::getline(mounts, line)) {
    // ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [TAGS...] - TYPE SOURCE SUPER
    std::istringstream fields(line);
    std::string id, parent, dev, root, point, field;
    fields >> id >> parent >> dev >> root >> point;
    while (fields >> field && field != "-") {
    }
    std::string type;
    fields >> type;
    const bool under = absolute == point || point == "/" ||
                       (absolute.starts_with(point) && absolute.size() > point.size() && absolute[point.size()] == '/');
    if (under && point.size() >= best_point.size()) {
      best_point = point;
      best_type = type;
    }
  }
  return best_type;
}

}  // namespace

std::string NetworkFileSystemNote(const std::string& path) {
  if (path.empty() || path.find("://") != std::string::npos) return "";
  bool network = false;
  const std::string type = FileSystemType(path, &network);
  if (!network) return "";
  std::string name = type;
  if (type == "fuse" || type == "nfs") {
    if (const std::string mounted = MountType(path); !mounted.empty()) name = mounted;
  }
  return "workload.path " + path + " is on " + name +
         ", a network or FUSE file system: remote data read as a local path. cache: cold evicts this box's page "
         "cache only; the server's or the FUSE daemon's own cache is outside the sweep's control. Reading the store "
         "directly (s3://...) lets the sweep tune requests in flight (loader.fetch_concurrency)";
}

int64_t FreeBytesFor(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path probe = fs::absolute(fs::path(path), ec);
  while (!probe.empty() && !fs::exists(probe, ec)) {
    if (probe == probe.parent_path()) break;
    probe = probe.parent_path();
  }
  struct statvfs vfs {};
  if (::statvfs(probe.c_str(), &vfs) != 0) return -1;
  return static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
}

std::string FormatMegabytes(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  return buf;
}

std::vector<std::string> ResolveShardPaths(const std::string& path, const std::vector<std::string>& extensions) {
  std::vector<std::string> paths;
  struct stat info {};
  if (path.find_first_of("*?[") != std::string::npos && ::stat(path.c_str(), &info) != 0) {
    glob_t found{};
    if (::glob(path.c_str(), 0, nullptr, &found) == 0) {
      for (size_t i = 0; i < found.gl_pathc; ++i) paths.emplace_back(found.gl_pathv[i]);
    }
    ::globfree(&found);
    std::erase_if(paths, [](const std::string& p) { return p.ends_with(".idx"); });
    if (paths.empty()) throw DatasetNotFound(path + ": the pattern matches no file");
  } else if (::stat(path.c_str(), &info) != 0) {
    throw DatasetNotFound(path + ": no such file or directory");
  } else if (S_ISDIR(info.st_mode)) {
    for (const auto& entry : std::filesystem::directory_iterator(path)) {
      const std::string name = entry.path().filename().string();
      const bool wanted = std::any_of(extensions.begin(), extensions.end(),
                                      [&](const std::string& ext) { return name.ends_with(ext); });
      if (entry.is_regular_file() && wanted) paths.push_back(entry.path().string());
    }
    if (paths.empty()) {
      std::string names;
      for (const auto& ext : extensions) names += (names.empty() ? "" : " or ") + ext;
      throw DatasetNotFound(path + ": the directory holds no " + names + " file");
    }
  } else {
    paths.push_back(path);
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

std::vector<std::string> ShardExtensions(WorkloadKind kind) {
  if (kind == WorkloadKind::kTfRecord) return {".tfrecord", ".tfrec"};
  if (kind == WorkloadKind::kTar) return {".tar"};
  return {};
}

std::vector<std::string> ResolveShardPaths(const FilesOptions& files, const std::vector<std::string>& extensions) {
  if (files.path_list.empty()) return ResolveShardPaths(files.path, extensions);
  std::vector<std::string> paths;
  std::map<std::string, size_t> named_by;  // a file, normalized -> the entry that named it
  for (size_t i = 0; i < files.path_list.size(); ++i) {
    const std::string entry = "entry [" + std::to_string(i) + "] of the list";
    std::vector<std::string> found;
    try {
      found = ResolveShardPaths(files.path_list[i], extensions);
    } catch (const DatasetNotFound& e) {
      throw DatasetNotFound(entry + ", " + e.what());
    }
    for (std::string& path : found) {
      const std::string key = std::filesystem::absolute(path).lexically_normal().string();
      if (const auto [it, added] = named_by.emplace(key, i); !added) {
        throw DatasetNotFound(entry + ", \"" + files.path_list[i] + "\", names " + path + ", which entry [" +
                              std::to_string(it->second) + "], \"" + files.path_list[it->second] +
                              "\", names too; list each shard once (a shard is read once an epoch)");
      }
      paths.push_back(std::move(path));
    }
  }
  return paths;
}

std::unique_ptr<loader::ShardReader> ReadSamplesInOrder(const loader::Dataset& dataset, int64_t first, int64_t count) {
  class Reader final : public loader::ShardReader {
   public:
    Reader(const loader::Dataset& dataset, int64_t first, int64_t count)
        : dataset_(dataset), next_(first), end_(first + count) {}
    bool Next(std::vector<std::byte>* sample, int64_t* index) override {
      if (next_ >= end_) return false;
      sample->resize(static_cast<size_t>(dataset_.max_sample_bytes()));
      sample->resize(static_cast<size_t>(dataset_.Read(next_, *sample)));
      *index = next_++;
      return true;
    }

   private:
    const loader::Dataset& dataset_;
    int64_t next_;
    const int64_t end_;
  };
  return std::make_unique<Reader>(dataset, first, count);
}

size_t ShardOfSample(const std::vector<int64_t>& firsts, int64_t index) {
  return static_cast<size_t>(std::upper_bound(firsts.begin(), firsts.end(), index) - firsts.begin() - 1);
}

}  // namespace feedtune::workloads

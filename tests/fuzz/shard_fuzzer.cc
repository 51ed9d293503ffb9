// libFuzzer target: the shard reader (workloads/shard_format.h, the shards
// layout of workloads/files_dataset.h), on damaged index and shard files.
//
// Input layout:
//   byte 0        flags: bit 0 fix the index's trailer CRC (so mutations reach
//                 the checks behind it), bit 1 read with mmap instead of pread,
//                 bit 2 drop the shard file (listed in the index but missing)
//   bytes 1..4    n, little-endian: the index file is the next min(n, rest) bytes
//   the rest      shard-00000.ftrec
// Both files are written to a scratch folder, then the dataset is opened and
// every record read.
//
// Checks: the only exceptions are DatasetNotFound and DatasetCorrupt, each with
// a non-empty one-line message naming a file of the dataset; a record that
// reads without error holds exactly the bytes the index points at; a sample
// never exceeds the shard's size (so a forged index cannot make the loader
// allocate out of proportion).
//
// Found so far: an index claiming 2^28 shards took minutes and gigabytes
// (fixed in ReadShardIndex; corpus/shard/regression-huge-shard-count.bin).
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "workloads/cpu_work.h"
#include "workloads/crc32c.h"
#include "workloads/files_dataset.h"
#include "workloads/shard_format.h"

namespace {

namespace fs = std::filesystem;
namespace wl = feedtune::workloads;

[[noreturn]] void Broken(const std::string& what, const std::string& detail) {
  std::fprintf(stderr, "shard_fuzzer: %s\n%s\n", what.c_str(), detail.c_str());
  std::abort();
}

// One scratch folder per fuzzing process, removed at exit. Never destroyed (a
// static string would be gone before the atexit handler that needs it runs).
const std::string& ScratchDir() {
  static const std::string* const dir = [] {
    std::string pattern = (fs::temp_directory_path() / "ftfuzz-shards.XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) Broken("mkdtemp failed", pattern);
    auto* kept = new std::string(pattern);
    std::atexit([] {
      std::error_code error;
      fs::remove_all(ScratchDir(), error);
    });
    return kept;
  }();
  return *dir;
}

void WriteFile(const std::string& path, std::span<const uint8_t> bytes) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) Broken("cannot write scratch file", path);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) Broken("cannot write scratch file", path);
    done += static_cast<size_t>(n);
  }
  close(fd);
}

void CheckMessage(const std::exception& e, const std::string& dir) {
  const std::string message = e.what();
  if (message.empty() || message.find('\n') != std::string::npos || message.find(dir) == std::string::npos) {
    Broken("a dataset error is not one line naming the dataset", message);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  const uint8_t flags = data[0];
  uint32_t n = 0;
  std::memcpy(&n, data + 1, 4);
  const std::span<const uint8_t> rest(data + 5, size - 5);
  std::vector<uint8_t> index(rest.begin(), rest.begin() + std::min<size_t>(n, rest.size()));
  const std::span<const uint8_t> shard = rest.subspan(index.size());
  if ((flags & 1) && index.size() >= 4) {
    const uint32_t crc = wl::Crc32c(std::as_bytes(std::span(index).first(index.size() - 4)));
    std::memcpy(index.data() + index.size() - 4, &crc, 4);
  }

  const std::string& dir = ScratchDir();
  const std::string shard_path = dir + "/" + wl::ShardFileName(0);
  WriteFile(dir + "/" + wl::kIndexFileName, index);
  if (flags & 4) {
    unlink(shard_path.c_str());
  } else {
    WriteFile(shard_path, shard);
  }

  wl::FilesOptions options;
  options.path = dir;
  options.layout = wl::FilesLayout::kShards;
  options.io = (flags & 2) ? wl::FilesIo::kMmap : wl::FilesIo::kPread;
  wl::SyntheticOptions cost;
  cost.cpu_us_per_sample = 0;
  cost.io_us_per_sample = 0;
  cost.jitter = 0;
  try {
    const wl::FilesDataset dataset(options, cost, wl::CpuCalibration{});
    if (dataset.max_sample_bytes() > static_cast<int64_t>(shard.size())) {
      Broken("a sample is larger than its shard", std::to_string(dataset.max_sample_bytes()));
    }
    const wl::ShardIndex parsed = wl::ReadShardIndex(dir);
    std::vector<std::byte> buffer(static_cast<size_t>(dataset.max_sample_bytes()));
    for (int64_t i = 0; i < dataset.size(); ++i) {
      try {
        const int64_t bytes = dataset.Read(i, buffer);
        const wl::IndexEntry& e = parsed.entries[static_cast<size_t>(i)];
        if (bytes != static_cast<int64_t>(e.length) ||
            std::memcmp(buffer.data(), shard.data() + e.offset + wl::kRecordHeaderBytes, e.length) != 0) {
          Broken("a record read without error differs from the shard's bytes", std::to_string(i));
        }
      } catch (const wl::DatasetCorrupt& e) {
        CheckMessage(e, dir);
      }
    }
  } catch (const wl::DatasetNotFound& e) {
    CheckMessage(e, dir);
  } catch (const wl::DatasetCorrupt& e) {
    CheckMessage(e, dir);
  }
  return 0;
}

// LmdbDataset: the values of an LMDB environment (workload.kind: lmdb), read
// with liblmdb as a torch Dataset over python3-lmdb reads them: sample i is
// the value of key i.
//
// decode: jpeg: each value is an image (a JPEG, or raw pixels as PPM),
// decoded, cropped and resized as a tar sample's JPEG member
// (workloads/jpeg_samples.h), straight from the map.
//
// Keys: an environment written by `feedtune gen-data --layout lmdb` holds
// "%09d" keys and a "__feedtune__" entry that says how many, so sample i is
// found by its key with no walk; any other environment (yours) is indexed
// once, at construction, by a cursor walk over its keys in key order
// (values are not read, only sized), and sample i is the i-th key.
//
// Fork safety (pytorch#113228, and LMDB's own rule: an MDB_env must not be
// used after fork): the constructor, in the main process before the fork
// server exists, opens the environment only to check and index it, and
// closes it again. Each process opens its own on its first Read(), with
// MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS (no lock file writes, read
// transactions not tied to a thread) and MDB_NORDAHEAD unless lmdb.readahead
// is on; a handle inherited through fork is dropped untouched.
//
// Threads: Read() is safe from any thread: the environment is opened under a
// mutex, then each read runs its own read-only transaction (MDB_NOTLS makes
// that legal across threads). Owned handles (MDB_env*) are closed by RAII.
//
// cache: cold: pages of a file stay in the page cache while any process maps
// them, so BeforeRepeat first drops the consumer's own environment (reopened
// on its next read); persistent workers keep theirs mapped, and the note
// says how much stayed resident.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "loader/dataset.h"
#include "workloads/jpeg_samples.h"
#include "workloads/options.h"
#include "workloads/sample_cost.h"

namespace feedtune::workloads {

inline constexpr const char* kLmdbMetaKey = "__feedtune__";

// What an environment is, as `inspect` reports it.
struct LmdbInfo {
  std::string path;
  bool gen_data_keys = false;  // written by feedtune gen-data (keys by formula)
  int64_t entries = 0;         // samples (gen-data's meta entry not counted)
  int64_t map_size = 0;        // bytes (mdb_env_info)
  int64_t page_size = 0;
  int64_t file_bytes = 0;      // data.mdb
  int64_t min_value_bytes = 0;
  int64_t max_value_bytes = 0;
  int64_t total_value_bytes = 0;
  std::string fs_type;
  bool network_fs = false;
};

class LmdbDataset final : public loader::Dataset {
 public:
  // Uses path and cache of `files`, lmdb_readahead of `format`, the cost keys
  // of `cost`. Throws DatasetNotFound (missing; not an LMDB environment) or
  // DatasetCorrupt (damaged; empty), naming the path.
  LmdbDataset(const FilesOptions& files, const FormatOptions& format, const SyntheticOptions& cost,
              const CpuCalibration& calibration);
  ~LmdbDataset() override;
  LmdbDataset(const LmdbDataset&) = delete;
  LmdbDataset& operator=(const LmdbDataset&) = delete;

  int64_t size() const override { return info_.entries; }
  int64_t max_sample_bytes() const override { return jpeg_ ? jpeg_->sample_bytes() : info_.max_value_bytes; }
  void SetEpoch(int64_t epoch) const override {
    if (jpeg_) jpeg_->SetEpoch(epoch);
  }
  void InitWorker(int /*worker_id*/) const override { cost_.InitWorker(); }
  int64_t Read(int64_t index, std::span<std::byte> out) const override;
  loader::RepeatPreparation BeforeRepeat() const override;

  const LmdbInfo& info() const { return info_; }
  std::string Describe() const;
  // The key of sample `index`.
  std::string KeyOf(int64_t index) const;

  // gen-data's key for sample i ("000001234").
  static std::string GenDataKey(int64_t index);

 private:
  struct Env;  // one process's open environment

  std::shared_ptr<Env> EnvForThisProcess() const;  // call with mu_ held

  const FilesOptions files_;
  const FormatOptions format_;
  const SampleCost cost_;
  // decode: jpeg: each value a JPEG (or raw pixels, PPM), decoded, cropped
  // and resized as a tar sample's .jpg member is.
  std::unique_ptr<const JpegSamples> jpeg_;
  // Constant after construction.
  LmdbInfo info_;
  std::vector<std::string> keys_;  // a walked environment's keys, in sample order; empty for gen-data's

  mutable std::mutex mu_;  // guards the two members below
  mutable pid_t env_pid_ = 0;
  // Shared with the reads in flight, so that BeforeRepeat can drop it.
  mutable std::shared_ptr<Env> env_;
};

// Writes `feedtune gen-data --layout lmdb`: a new environment directory (absent
// or empty) with value i under GenDataKey(i), and the meta entry. Used by one
// thread; an unfinished writer leaves no meta entry (so a reader walks it).
class LmdbWriter {
 public:
  LmdbWriter(std::string dir, int64_t samples, int64_t sample_bytes);
  LmdbWriter(const LmdbWriter&) = delete;
  LmdbWriter& operator=(const LmdbWriter&) = delete;
  ~LmdbWriter();

  void Add(std::span<const std::byte> value);
  void Finish();
  int64_t bytes_written() const { return bytes_written_; }

 private:
  struct Env;
  void Commit();

  const std::string dir_;
  const int64_t samples_;
  const int64_t sample_bytes_;
  std::unique_ptr<Env> env_;
  int64_t added_ = 0;
  int64_t bytes_written_ = 0;
};

}  // namespace feedtune::workloads

#include "workloads/lmdb_dataset.h"

#include <lmdb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "workloads/format_io.h"
#include "workloads/jpeg_image.h"
#include "workloads/shard_format.h"

namespace feedtune::workloads {
namespace {

constexpr int64_t kCommitEvery = 1000;  // writer: values per write transaction

std::string LmdbText(int rc) { return mdb_strerror(rc); }

// Owns an MDB_env*; closes it on destruction.
struct EnvHandle {
  MDB_env* env = nullptr;
  EnvHandle() = default;
  EnvHandle(const EnvHandle&) = delete;
  EnvHandle& operator=(const EnvHandle&) = delete;
  ~EnvHandle() {
    if (env != nullptr) mdb_env_close(env);
  }
};

// Owns a transaction; aborts it unless committed.
struct TxnHandle {
  MDB_txn* txn = nullptr;
  TxnHandle() = default;
  TxnHandle(const TxnHandle&) = delete;
  TxnHandle& operator=(const TxnHandle&) = delete;
  ~TxnHandle() {
    if (txn != nullptr) mdb_txn_abort(txn);
  }
  int Commit() {
    const int rc = mdb_txn_commit(txn);
    txn = nullptr;
    return rc;
  }
};

struct CursorHandle {
  MDB_cursor* cursor = nullptr;
  CursorHandle() = default;
  CursorHandle(const CursorHandle&) = delete;
  CursorHandle& operator=(const CursorHandle&) = delete;
  ~CursorHandle() {
    if (cursor != nullptr) mdb_cursor_close(cursor);
  }
};

// The data file of an environment given as a directory or as its data file.
std::string DataFile(const std::string& path, bool* is_file) {
  struct stat st {};
  *is_file = ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  return *is_file ? path : path + "/data.mdb";
}

// Opens `path` read-only with the flags every reader uses. Throws
// DatasetNotFound for a path that is not an LMDB environment.
void OpenReadOnly(EnvHandle* handle, MDB_dbi* dbi, const std::string& path, bool readahead) {
  struct stat st {};
  if (path.empty()) throw DatasetNotFound("workload.path is empty: name the LMDB environment");
  if (::stat(path.c_str(), &st) != 0) throw DatasetNotFound(path + ": cannot open: " + ErrnoText(errno));
  bool is_file = false;
  const std::string data = DataFile(path, &is_file);
  if (!is_file && ::stat(data.c_str(), &st) != 0) {
    throw DatasetNotFound(path + ": not an LMDB environment (no data.mdb in the directory)");
  }
  int rc = mdb_env_create(&handle->env);
  if (rc != 0) throw DatasetCorrupt(path + ": mdb_env_create: " + LmdbText(rc));
  unsigned flags = MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS;
  if (!readahead) flags |= MDB_NORDAHEAD;
  if (is_file) flags |= MDB_NOSUBDIR;
  rc = mdb_env_open(handle->env, path.c_str(), flags, 0644);
  if (rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH) {
    throw DatasetNotFound(path + ": not an LMDB environment (" + data + ": " + LmdbText(rc) + ")");
  }
  if (rc != 0) throw DatasetCorrupt(path + ": cannot open the LMDB environment: " + LmdbText(rc));
  TxnHandle txn;
  rc = mdb_txn_begin(handle->env, nullptr, MDB_RDONLY, &txn.txn);
  if (rc == 0) rc = mdb_dbi_open(txn.txn, nullptr, 0, dbi);
  if (rc == 0) rc = txn.Commit();  // the dbi stays valid for the environment's life
  if (rc != 0) throw DatasetCorrupt(path + ": cannot open the main database: " + LmdbText(rc));
}

}  // namespace

struct LmdbDataset::Env {
  EnvHandle handle;
  MDB_dbi dbi = 0;
};

std::string LmdbDataset::GenDataKey(int64_t index) {
  char key[32];
  std::snprintf(key, sizeof key, "%09" PRId64, index);
  return key;
}

LmdbDataset::LmdbDataset(const FilesOptions& files, const FormatOptions& format, const SyntheticOptions& cost,
                         const CpuCalibration& calibration)
    : files_(files), format_(format), cost_(cost, calibration) {
  if (files_.decode == FilesDecode::kJpeg) jpeg_ = std::make_unique<const JpegSamples>(files_, cost.seed);
  const std::string& path = files_.path;
  info_.path = path;
  // Opened to check and index, closed at the end of this block, before any fork.
  Env env;
  OpenReadOnly(&env.handle, &env.dbi, path, format_.lmdb_readahead);
  MDB_envinfo envinfo{};
  MDB_stat stat{};
  mdb_env_info(env.handle.env, &envinfo);
  mdb_env_stat(env.handle.env, &stat);
  info_.map_size = static_cast<int64_t>(envinfo.me_mapsize);
  info_.page_size = stat.ms_psize;
  bool is_file = false;
  struct stat st {};
  if (::stat(DataFile(path, &is_file).c_str(), &st) == 0) info_.file_bytes = st.st_size;
  info_.fs_type = FileSystemType(path, &info_.network_fs);

  TxnHandle txn;
  int rc = mdb_txn_begin(env.handle.env, nullptr, MDB_RDONLY, &txn.txn);
  if (rc != 0) throw DatasetCorrupt(path + ": cannot begin a read transaction: " + LmdbText(rc));
  MDB_val key{std::strlen(kLmdbMetaKey), const_cast<char*>(kLmdbMetaKey)};
  MDB_val value{};
  rc = mdb_get(txn.txn, env.dbi, &key, &value);
  long long samples = 0, sample_bytes = 0;
  if (rc == 0 && std::sscanf(std::string(static_cast<const char*>(value.mv_data), value.mv_size).c_str(),
                             "feedtune-lmdb-v1 samples=%lld sample_bytes=%lld", &samples, &sample_bytes) == 2 &&
      samples > 0 && sample_bytes > 0) {
    info_.gen_data_keys = true;
    info_.entries = samples;
    info_.min_value_bytes = info_.max_value_bytes = sample_bytes;
    info_.total_value_bytes = samples * sample_bytes;
    if (static_cast<int64_t>(stat.ms_entries) != samples + 1) {
      throw DatasetCorrupt(path + ": written by gen-data for " + std::to_string(samples) + " samples, but it holds " +
                           std::to_string(stat.ms_entries - 1) + " values: it was changed since; write it again");
    }
  } else {
    // A user's environment: index its keys once, in key order.
    CursorHandle cursor;
    rc = mdb_cursor_open(txn.txn, env.dbi, &cursor.cursor);
    if (rc != 0) throw DatasetCorrupt(path + ": cannot open a cursor: " + LmdbText(rc));
    int64_t min_bytes = INT64_MAX;
    for (rc = mdb_cursor_get(cursor.cursor, &key, &value, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cursor.cursor, &key, &value, MDB_NEXT)) {
      keys_.emplace_back(static_cast<const char*>(key.mv_data), key.mv_size);
      const auto bytes = static_cast<int64_t>(value.mv_size);
      min_bytes = std::min(min_bytes, bytes);
      info_.max_value_bytes = std::max(info_.max_value_bytes, bytes);
      info_.total_value_bytes += bytes;
    }
    if (rc != MDB_NOTFOUND) {
      throw DatasetCorrupt(path + ": the key walk stopped after " + std::to_string(keys_.size()) +
                           " entries: " + LmdbText(rc));
    }
    info_.entries = static_cast<int64_t>(keys_.size());
    info_.min_value_bytes = keys_.empty() ? 0 : min_bytes;
  }
  if (info_.entries == 0) throw DatasetCorrupt(path + ": the LMDB environment holds no entries");
  if (info_.max_value_bytes == 0) throw DatasetCorrupt(path + ": every value is empty (0 bytes)");
  if (info_.max_value_bytes > (int64_t{1} << 30)) {
    throw DatasetCorrupt(path + ": a value of " + std::to_string(info_.max_value_bytes) +
                         " bytes is larger than 1 GiB, the largest sample feedtune reads");
  }
}

LmdbDataset::~LmdbDataset() {
  // A forked copy's environment belongs to the process that opened it: LMDB
  // forbids using (or closing) it after fork, so it is dropped untouched.
  if (env_ != nullptr && env_pid_ != ::getpid()) {
    // Leaked on purpose: a shared_ptr cannot release, so keep a copy alive forever.
    new std::shared_ptr<Env>(std::move(env_));
  }
}

std::string LmdbDataset::KeyOf(int64_t index) const {
  return info_.gen_data_keys ? GenDataKey(index) : keys_[static_cast<size_t>(index)];
}

std::shared_ptr<LmdbDataset::Env> LmdbDataset::EnvForThisProcess() const {
  const pid_t pid = ::getpid();
  if (env_ != nullptr && env_pid_ == pid) return env_;
  if (env_ != nullptr) new std::shared_ptr<Env>(std::move(env_));  // inherited through fork: see the destructor
  auto env = std::make_shared<Env>();
  OpenReadOnly(&env->handle, &env->dbi, files_.path, format_.lmdb_readahead);
  env_ = std::move(env);
  env_pid_ = pid;
  return env_;
}

int64_t LmdbDataset::Read(int64_t index, std::span<std::byte> out) const {
  if (index < 0 || index >= size()) {
    throw std::out_of_range("sample index " + std::to_string(index) + " outside [0, " + std::to_string(size()) + ")");
  }
  cost_.BeforeRead(index);
  std::shared_ptr<Env> env;
  {
    const std::lock_guard lock(mu_);
    env = EnvForThisProcess();
  }
  const std::string key_text = KeyOf(index);
  const auto fail = [&](const std::string& what) {
    throw DatasetCorrupt(files_.path + ": key '" + key_text + "' (sample " + std::to_string(index) + "): " + what);
  };
  size_t bytes = 0;
  {
    TxnHandle txn;  // ended before the CPU work
    int rc = mdb_txn_begin(env->handle.env, nullptr, MDB_RDONLY, &txn.txn);
    if (rc != 0) fail("cannot begin a read transaction: " + LmdbText(rc));
    MDB_val key{key_text.size(), const_cast<char*>(key_text.data())};
    MDB_val value{};
    rc = mdb_get(txn.txn, env->dbi, &key, &value);
    if (rc == MDB_NOTFOUND) fail("not found (the environment changed since it was opened)");
    if (rc != 0) fail("read failed: " + LmdbText(rc));
    if (jpeg_) {
      try {
        bytes = static_cast<size_t>(
            jpeg_->Decode({static_cast<const std::byte*>(value.mv_data), value.mv_size}, index, out));
      } catch (const JpegError& e) {
        fail(std::string("decode: jpeg: ") + e.what());
      }
    } else if (value.mv_size > out.size()) {
      fail("a value of " + std::to_string(value.mv_size) + " bytes, larger than the " + std::to_string(out.size()) +
           " bytes seen at open (the environment changed since)");
    } else {
      std::memcpy(out.data(), value.mv_data, value.mv_size);
      bytes = value.mv_size;
    }
  }
  cost_.AfterRead(index, out.first(bytes));
  return static_cast<int64_t>(bytes);
}

loader::RepeatPreparation LmdbDataset::BeforeRepeat() const {
  if (files_.cache != CacheMode::kCold) return {};
  {
    // This process's map would keep the pages resident; reads in flight keep
    // their own reference, the next read reopens.
    const std::lock_guard lock(mu_);
    if (env_ != nullptr && env_pid_ == ::getpid()) env_.reset();
  }
  bool is_file = false;
  return EvictFromPageCache({DataFile(files_.path, &is_file)});
}

std::string LmdbDataset::Describe() const {
  return files_.path + ": LMDB, " + std::to_string(info_.entries) + " entries, values " +
         std::to_string(info_.min_value_bytes) + "-" + std::to_string(info_.max_value_bytes) + " bytes, " +
         FormatMegabytes(static_cast<double>(info_.file_bytes)) + " on " + info_.fs_type + ", keys " +
         (info_.gen_data_keys ? "by gen-data's formula" : "indexed by a cursor walk") +
         ", opened in each worker after fork (MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS" +
         (format_.lmdb_readahead ? ", readahead on" : " | MDB_NORDAHEAD") + "), cache " + CacheModeName(files_.cache) +
         (jpeg_ ? ", each value" + jpeg_->Describe() : std::string());
}

// ---------------------------------------------------------------------------
// The writer.

struct LmdbWriter::Env {
  EnvHandle handle;
  MDB_dbi dbi = 0;
  TxnHandle txn;
};

LmdbWriter::LmdbWriter(std::string dir, int64_t samples, int64_t sample_bytes)
    : dir_(std::move(dir)), samples_(samples), sample_bytes_(sample_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir_, ec) && !(fs::is_directory(dir_, ec) && fs::is_empty(dir_, ec))) {
    throw std::runtime_error(dir_ + ": exists and is not an empty directory; choose another --out or remove it");
  }
  fs::create_directories(dir_, ec);
  if (ec) throw std::runtime_error(dir_ + ": cannot create: " + ec.message());
  env_ = std::make_unique<Env>();
  int rc = mdb_env_create(&env_->handle.env);
  // Room for the values, their pages' overhead and the tree: twice the payload, plus 64 MiB.
  const auto map_size = static_cast<size_t>(2 * samples * (sample_bytes + 64) + (int64_t{64} << 20));
  if (rc == 0) rc = mdb_env_set_mapsize(env_->handle.env, map_size);
  if (rc == 0) rc = mdb_env_open(env_->handle.env, dir_.c_str(), MDB_NOSYNC, 0644);
  if (rc == 0) rc = mdb_txn_begin(env_->handle.env, nullptr, 0, &env_->txn.txn);
  if (rc == 0) rc = mdb_dbi_open(env_->txn.txn, nullptr, 0, &env_->dbi);
  if (rc != 0) throw std::runtime_error(dir_ + ": cannot create the LMDB environment: " + LmdbText(rc));
}

LmdbWriter::~LmdbWriter() = default;

void LmdbWriter::Commit() {
  const int rc = env_->txn.Commit();
  if (rc != 0) throw std::runtime_error(dir_ + ": commit failed: " + LmdbText(rc));
}

void LmdbWriter::Add(std::span<const std::byte> value) {
  const std::string key_text = LmdbDataset::GenDataKey(added_);
  MDB_val key{key_text.size(), const_cast<char*>(key_text.data())};
  MDB_val data{value.size(), const_cast<std::byte*>(value.data())};
  int rc = mdb_put(env_->txn.txn, env_->dbi, &key, &data, MDB_APPEND);  // keys arrive sorted
  if (rc != 0) throw std::runtime_error(dir_ + ": put of key '" + key_text + "' failed: " + LmdbText(rc));
  ++added_;
  bytes_written_ += static_cast<int64_t>(value.size());
  if (added_ % kCommitEvery == 0) {
    Commit();
    rc = mdb_txn_begin(env_->handle.env, nullptr, 0, &env_->txn.txn);
    if (rc != 0) throw std::runtime_error(dir_ + ": cannot begin a write transaction: " + LmdbText(rc));
  }
}

void LmdbWriter::Finish() {
  if (added_ != samples_) {
    throw std::logic_error("LmdbWriter::Finish: " + std::to_string(added_) + " of " + std::to_string(samples_) +
                           " values written");
  }
  const std::string meta = "feedtune-lmdb-v1 samples=" + std::to_string(samples_) +
                           " sample_bytes=" + std::to_string(sample_bytes_);
  MDB_val key{std::strlen(kLmdbMetaKey), const_cast<char*>(kLmdbMetaKey)};
  MDB_val data{meta.size(), const_cast<char*>(meta.data())};
  const int rc = mdb_put(env_->txn.txn, env_->dbi, &key, &data, 0);
  if (rc != 0) throw std::runtime_error(dir_ + ": put of the meta entry failed: " + LmdbText(rc));
  Commit();
  const int sync = mdb_env_sync(env_->handle.env, 1);
  if (sync != 0) throw std::runtime_error(dir_ + ": sync failed: " + LmdbText(sync));
  struct stat st {};
  if (::stat((dir_ + "/data.mdb").c_str(), &st) == 0) bytes_written_ = st.st_size;
  env_.reset();
}

}  // namespace feedtune::workloads

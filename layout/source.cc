#include "layout/source.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <span>
#include <stdexcept>
#include <utility>

#include "storage/credentials.h"
#include "storage/location.h"
#include "workloads/cpu_work.h"
#include "workloads/files_dataset.h"
#include "workloads/format_inspect.h"
#include "workloads/format_io.h"
#include "workloads/hdf5_dataset.h"
#include "workloads/jpeg_image.h"
#include "workloads/lmdb_dataset.h"
#include "workloads/npy_dataset.h"
#include "workloads/remote_dataset.h"
#include "workloads/remote_tar_dataset.h"
#include "workloads/shard_format.h"
#include "workloads/tar_dataset.h"
#include "workloads/tfrecord_dataset.h"

namespace feedtune::layout {
namespace {

namespace fs = std::filesystem;
using workloads::DatasetCorrupt;
using workloads::DatasetNotFound;

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// "jpg" for the JPEG spellings, else the extension itself, lower case.
std::string NormalExtension(const std::string& ext) {
  const std::string lower = Lower(ext);
  if (lower == "jpg" || lower == "jpeg" || lower == "jpe") return "jpg";
  return lower;
}

// The extension every name shares (after the last dot of the file name), or
// "bin" when they differ or some have none: a reader is told what the bytes
// are only when that is true of all of them.
std::string SharedExtension(const std::vector<std::string>& names) {
  std::string shared;
  for (const std::string& name : names) {
    const std::string file = fs::path(name).filename().string();
    const size_t dot = file.rfind('.');
    if (dot == std::string::npos || dot + 1 == file.size()) return "bin";
    const std::string ext = NormalExtension(file.substr(dot + 1));
    if (ext.size() > 8 || !std::all_of(ext.begin(), ext.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)); })) {
      return "bin";
    }
    if (shared.empty()) shared = ext;
    if (ext != shared) return "bin";
  }
  return shared.empty() ? "bin" : shared;
}

// ImageFolder's classes: sample i's is the first folder of relative[i] (its
// path under `root`), the folders numbered in name order. `names` are the
// samples as messages name them.
std::vector<int64_t> ImageFolderLabels(const std::vector<std::string>& relative, const std::vector<std::string>& names,
                                       const std::string& root) {
  std::vector<std::string> classes(relative.size());
  std::set<std::string> folders;
  for (size_t i = 0; i < relative.size(); ++i) {
    const fs::path rel(relative[i]);
    if (std::distance(rel.begin(), rel.end()) < 2) {
      throw std::invalid_argument("--labels folder: " + names[i] + " is not inside a class folder of " + root +
                                  " (ImageFolder: PATH/CLASS/FILE); move it into one, or use --labels none");
    }
    classes[i] = rel.begin()->string();
    folders.insert(classes[i]);
  }
  std::map<std::string, int64_t> number;
  for (const std::string& folder : folders) number.emplace(folder, static_cast<int64_t>(number.size()));
  std::vector<int64_t> labels;
  labels.reserve(classes.size());
  for (const std::string& c : classes) labels.push_back(number.at(c));
  return labels;
}

// A source over one of the loader's datasets of workloads/: sample i is its Read(i).
class DatasetSource : public SampleSource {
 public:
  DatasetSource(std::unique_ptr<loader::Dataset> dataset, std::string name_prefix, std::string kind, std::string root)
      : dataset_(std::move(dataset)), prefix_(std::move(name_prefix)) {
    kind_ = std::move(kind);
    root_ = std::move(root);
  }
  int64_t size() const override { return dataset_->size(); }
  void Read(int64_t index, std::vector<std::byte>* bytes) const override {
    bytes->resize(static_cast<size_t>(dataset_->max_sample_bytes()));
    int64_t got = 0;
    try {
      got = dataset_->Read(index, *bytes);
    } catch (const std::exception& e) {
      throw DatasetCorrupt(Name(index) + ": " + e.what());
    }
    bytes->resize(static_cast<size_t>(got));
  }
  std::string Name(int64_t index) const override { return prefix_ + std::to_string(index); }
  int64_t total_bytes() const override { return total_; }
  int64_t fixed_sample_bytes() const override { return fixed_; }
  void SetLabels(std::vector<int64_t> labels) { labels_ = std::move(labels); }
  void SetSizes(int64_t total, int64_t fixed) {
    total_ = total;
    fixed_ = fixed;
  }
  void SetExtension(std::string ext) { extension_ = std::move(ext); }

 protected:
  std::unique_ptr<loader::Dataset> dataset_;
  const std::string prefix_;
  int64_t total_ = 0;
  int64_t fixed_ = 0;
};

// A folder of files: sample i is the i-th file in path order, named by its path.
class FolderSource final : public DatasetSource {
 public:
  FolderSource(std::unique_ptr<workloads::FilesDataset> files, const std::string& root)
      : DatasetSource(nullptr, "", "folder", root), files_(files.get()) {
    dataset_ = std::move(files);
    int64_t fixed = files_->file_bytes(0);
    for (int64_t i = 0; i < files_->size(); ++i) {
      if (files_->file_bytes(i) != fixed) fixed = 0;
    }
    SetSizes(files_->total_bytes(), fixed);
    SetExtension(SharedExtension(files_->files()));
  }
  void Read(int64_t index, std::vector<std::byte>* bytes) const override {
    bytes->resize(static_cast<size_t>(dataset_->max_sample_bytes()));
    // FilesDataset's errors name the file and the sample already.
    bytes->resize(static_cast<size_t>(dataset_->Read(index, *bytes)));
  }
  std::string Name(int64_t index) const override { return files_->files()[static_cast<size_t>(index)]; }
  std::string copy_name(int64_t index) const override {
    return fs::path(Name(index)).lexically_relative(fs::path(root_)).string();
  }

  // ImageFolder: the class of each file is the folder under the root that
  // holds it, the folders numbered in name order.
  void LabelByFolder() {
    const fs::path root = fs::path(root_);
    std::vector<std::string> relative;
    for (const std::string& file : files_->files()) relative.push_back(fs::path(file).lexically_relative(root).string());
    SetLabels(ImageFolderLabels(relative, files_->files(), root_));
    kind_ = "imagefolder";
  }

 private:
  const workloads::FilesDataset* files_;
};

// A sample of tar shards as convert carries it: its one payload member and
// its .cls label member (none: an empty name), in shard `shard`.
struct TarEntry {
  uint32_t shard = 0;
  workloads::TarMember payload;
  workloads::TarMember cls;
};

std::string JoinNames(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// Sample `s` of shard `shard` (named `file` in messages). Throws for a
// sample of several payload members (convert carries one) or none.
TarEntry TarEntryOf(const workloads::TarSample& s, uint32_t shard, const std::string& file) {
  TarEntry entry{shard, {}, {}};
  std::vector<std::string> fields;
  for (const workloads::TarMember& m : s.fields) {
    std::string key, ext;
    workloads::SplitTarKey(m.name, &key, &ext);
    fields.push_back(ext);
    if (Lower(ext) == "cls") {
      entry.cls = m;
    } else if (entry.payload.name.empty()) {
      entry.payload = m;
    } else {
      throw std::invalid_argument(file + ": sample '" + s.key + "' has the members " + JoinNames(fields) +
                                  "...: convert carries one payload member per sample (and its .cls label); "
                                  "split the fields into datasets of their own");
    }
  }
  if (entry.payload.name.empty()) {
    throw DatasetCorrupt(file + ": sample '" + s.key + "' has no payload member, only " + JoinNames(fields));
  }
  return entry;
}

// A .cls member's class number (WebDataset's convention: a decimal integer,
// whitespace after it allowed); throws naming `where` for anything else.
int64_t ClassOf(std::string text, const std::string& where) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  size_t used = 0;
  int64_t label = -1;
  try {
    label = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || label < 0) {
    throw DatasetCorrupt(where + ": expected a class number (a decimal integer >= 0), got '" + text.substr(0, 40) +
                         "'; use --labels none to leave labels out");
  }
  return label;
}

// The byte after the last member's padding: where the two zero blocks that
// end an archive begin.
uint64_t TarMembersEnd(const std::vector<workloads::TarMember>& members, std::string* last) {
  uint64_t end = 0;
  *last = "(none)";
  for (const workloads::TarMember& m : members) {
    const uint64_t member_end = (m.data_offset + m.size + workloads::kTarBlock - 1) / workloads::kTarBlock *
                                workloads::kTarBlock;
    if (member_end >= end) {
      end = member_end;
      *last = m.name;
    }
  }
  return end;
}

// The scanner takes the end of the file on a block boundary for the end of
// the archive, as readers do; a shard cut there has lost its last samples
// without a trace but one: the two zero blocks every tar writer ends an
// archive with are missing. A convert must not lose samples. `tail` holds
// the bytes at TarMembersEnd (fewer where the file ends sooner).
void CheckTarEnd(const std::string& file, int64_t file_bytes, const std::vector<workloads::TarMember>& members,
                 std::span<const std::byte> tail) {
  std::string last;
  const uint64_t end = TarMembersEnd(members, &last);
  const bool zero = tail.size() >= 2 * workloads::kTarBlock &&
                    std::all_of(tail.begin(), tail.begin() + 2 * workloads::kTarBlock,
                                [](std::byte b) { return b == std::byte{0}; });
  if (!zero) {
    throw DatasetCorrupt(file + ": truncated: no end-of-archive blocks after its last member " + last +
                         " (which ends at byte " + std::to_string(end) + " of " + std::to_string(file_bytes) +
                         "): the shard was cut short and its last samples are lost; copy it again");
  }
}

// The labels of `entries` when the options ask for them: --labels cls
// requires every sample's .cls member, auto takes them when every sample has
// one. `read_class(entry)` gives an entry's class number.
std::vector<int64_t> TarLabels(const std::vector<TarEntry>& entries, const SourceOptions& options,
                               const std::string& path, const std::function<int64_t(const TarEntry&)>& read_class) {
  const bool all_labelled =
      std::all_of(entries.begin(), entries.end(), [](const TarEntry& e) { return !e.cls.name.empty(); });
  if (options.labels == "cls" && !all_labelled) {
    throw std::invalid_argument("--labels cls: not every sample of " + path + " has a .cls member");
  }
  std::vector<int64_t> labels;
  if (options.labels == "auto" ? all_labelled : options.labels == "cls") {
    labels.reserve(entries.size());
    for (const TarEntry& e : entries) labels.push_back(read_class(e));
  }
  return labels;
}

// Tar shards read with the strict scanner of workloads/tar_format.h: sample i
// is the one payload member of the i-th sample through the shards, its label
// its .cls member.
class TarSource final : public SampleSource {
 public:
  TarSource(const std::string& path, const SourceOptions& options) {
    kind_ = "tar";
    root_ = path;
    std::vector<std::string> payload_names;
    for (const std::string& file : workloads::ResolveShardPaths(path, {".tar"})) {
      workloads::UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd.valid()) throw DatasetNotFound(file + ": cannot open: " + workloads::ErrnoText(errno));
      struct stat st {};
      if (::fstat(fd.get(), &st) != 0) throw DatasetNotFound(file + ": cannot stat: " + workloads::ErrnoText(errno));
      const auto members = workloads::ScanTarFile(file, fd.get(), st.st_size);
      std::string last;
      std::vector<std::byte> tail(2 * workloads::kTarBlock);
      const uint64_t end = TarMembersEnd(members, &last);
      int error = 0;
      tail.resize(static_cast<uint64_t>(st.st_size) >= end + tail.size() ? workloads::PreadFull(fd.get(), tail, end, &error)
                                                                          : 0);
      CheckTarEnd(file, st.st_size, members, tail);
      const auto samples = workloads::GroupTarSamples(members);
      if (samples.empty()) throw DatasetCorrupt(file + ": no sample in the shard (no member named KEY.EXT)");
      const auto shard = static_cast<uint32_t>(fds_.size());
      for (const workloads::TarSample& s : samples) {
        entries_.push_back(TarEntryOf(s, shard, file));
        payload_names.push_back(entries_.back().payload.name);
        total_ += static_cast<int64_t>(entries_.back().payload.size);
      }
      paths_.push_back(file);
      fds_.push_back(std::move(fd));
    }
    fixed_ = static_cast<int64_t>(entries_.front().payload.size);
    for (const TarEntry& e : entries_) {
      if (static_cast<int64_t>(e.payload.size) != fixed_) fixed_ = 0;
    }
    extension_ = SharedExtension(payload_names);
    labels_ = TarLabels(entries_, options, path, [this](const TarEntry& e) {
      std::string text(e.cls.size, '\0');
      ReadMember(e, e.cls, std::as_writable_bytes(std::span(text)));
      return ClassOf(text, paths_[e.shard] + " member " + e.cls.name);
    });
  }
  int64_t size() const override { return static_cast<int64_t>(entries_.size()); }
  void Read(int64_t index, std::vector<std::byte>* bytes) const override {
    const TarEntry& e = entries_[static_cast<size_t>(index)];
    bytes->resize(e.payload.size);
    ReadMember(e, e.payload, *bytes);
  }
  std::string Name(int64_t index) const override {
    const TarEntry& e = entries_[static_cast<size_t>(index)];
    return paths_[e.shard] + " member " + e.payload.name;
  }
  int64_t total_bytes() const override { return total_; }
  int64_t fixed_sample_bytes() const override { return fixed_; }
  int64_t shard_count() const override { return static_cast<int64_t>(paths_.size()); }

 private:
  void ReadMember(const TarEntry& e, const workloads::TarMember& m, std::span<std::byte> out) const {
    int error = 0;
    const size_t got = workloads::PreadFull(fds_[e.shard].get(), out, m.data_offset, &error);
    if (error != 0) throw DatasetCorrupt(paths_[e.shard] + " member " + m.name + ": read failed: " + workloads::ErrnoText(error));
    if (got < out.size()) {
      throw DatasetCorrupt(paths_[e.shard] + " member " + m.name + ": truncated at byte " +
                           std::to_string(m.data_offset + got) + " (the shard changed since it was opened)");
    }
  }

  std::vector<std::string> paths_;
  std::vector<workloads::UniqueFd> fds_;
  std::vector<TarEntry> entries_;
  int64_t total_ = 0;
  int64_t fixed_ = 0;
};

// Tar shards under an s3:// prefix (its *.tar objects in key order), read
// as TarSource reads local ones, with the same checks: each shard's members
// indexed from its headers through ranged GETs of a window, shards side by
// side (workloads::ScanRemoteTarShards, as RemoteTarDataset opens them), a
// .cls label read in the same pass from the window that held its header
// (no round trip of its own), and each shard's end-of-archive blocks
// fetched and checked. Sample i is its payload member, one ranged GET;
// WillRead fetches the samples about to be read together,
// kReadAheadInFlight in flight, and Read takes them from there.
class RemoteTarSource final : public SampleSource {
 public:
  static constexpr int kReadAheadInFlight = 16;
  static constexpr int64_t kReadAheadBytes = int64_t{64} << 20;
  static constexpr uint64_t kLargestLabel = 64;  // bytes: a .cls member is a number

  RemoteTarSource(const std::string& path, const SourceOptions& options)
      : client_(storage::ParseLocation(path), storage::ResolveAwsConfig(storage::ProcessEnvironment())) {
    kind_ = "tar";
    root_ = path;
    shards_ = workloads::ListRemoteTarShards(client_);
    std::vector<std::vector<workloads::TarMember>> members(shards_.size());
    std::vector<std::map<uint64_t, std::string>> classes(shards_.size());  // a .cls member's text by its offset
    workloads::ScanRemoteTarShards(client_, &shards_, [&](size_t shard, const workloads::TarMember& m,
                                                          workloads::WindowedObjectReader& reader) {
      members[shard].push_back(m);
      std::string key, ext;
      if (workloads::SplitTarKey(m.name, &key, &ext) && Lower(ext) == "cls" && m.size <= kLargestLabel) {
        std::string text(m.size, '\0');
        text.resize(reader.Read(m.data_offset, std::as_writable_bytes(std::span(text))));
        classes[shard][m.data_offset] = std::move(text);
      }
    });
    CheckEnds(members);
    std::vector<std::string> payload_names;
    for (size_t s = 0; s < shards_.size(); ++s) {
      const auto samples = workloads::GroupTarSamples(members[s]);
      if (samples.empty()) throw DatasetCorrupt(shards_[s].name + ": no sample in the shard (no member named KEY.EXT)");
      for (const workloads::TarSample& sample : samples) {
        entries_.push_back(TarEntryOf(sample, static_cast<uint32_t>(s), shards_[s].name));
        payload_names.push_back(entries_.back().payload.name);
        total_ += static_cast<int64_t>(entries_.back().payload.size);
      }
    }
    fixed_ = static_cast<int64_t>(entries_.front().payload.size);
    for (const TarEntry& e : entries_) {
      if (static_cast<int64_t>(e.payload.size) != fixed_) fixed_ = 0;
    }
    extension_ = SharedExtension(payload_names);
    labels_ = TarLabels(entries_, options, path, [&](const TarEntry& e) {
      const std::string where = shards_[e.shard].name + " member " + e.cls.name;
      const auto it = classes[e.shard].find(e.cls.data_offset);
      if (it == classes[e.shard].end()) {
        throw DatasetCorrupt(where + ": " + std::to_string(e.cls.size) + " bytes, not a class number; use --labels "
                             "none to leave labels out");
      }
      return ClassOf(it->second, where);
    });
  }
  int64_t size() const override { return static_cast<int64_t>(entries_.size()); }
  void Read(int64_t index, std::vector<std::byte>* bytes) const override {
    if (auto it = ahead_.find(index); it != ahead_.end()) {
      *bytes = std::move(it->second);
      ahead_.erase(it);
      return;
    }
    const TarEntry& e = entries_[static_cast<size_t>(index)];
    *bytes = client_.Get().Get(shards_[e.shard].key, RangeOf(e));
    CheckLength(index, bytes->size());
  }
  void WillRead(std::span<const int64_t> indices) const override {
    ahead_.clear();  // what was fetched and not read is not read now
    std::vector<int64_t> batch;
    int64_t bytes = 0;
    for (int64_t i : indices) {
      const auto size = static_cast<int64_t>(entries_[static_cast<size_t>(i)].payload.size);
      if (!batch.empty() && bytes + size > kReadAheadBytes) break;
      batch.push_back(i);
      bytes += size;
    }
    std::vector<storage::GetRequest> requests;
    for (int64_t i : batch) {
      const TarEntry& e = entries_[static_cast<size_t>(i)];
      std::vector<std::byte>& out = ahead_[i];
      out.resize(e.payload.size);
      requests.push_back({shards_[e.shard].key, RangeOf(e), out});
    }
    if (requests.empty()) return;
    const std::vector<int64_t> got = client_.Get().GetMany(requests, kReadAheadInFlight);
    for (size_t k = 0; k < batch.size(); ++k) CheckLength(batch[k], static_cast<size_t>(got[k]));
  }
  std::string Name(int64_t index) const override {
    const TarEntry& e = entries_[static_cast<size_t>(index)];
    return shards_[e.shard].name + " member " + e.payload.name;
  }
  int64_t total_bytes() const override { return total_; }
  int64_t fixed_sample_bytes() const override { return fixed_; }
  int64_t shard_count() const override { return static_cast<int64_t>(shards_.size()); }

 private:
  static storage::ByteRange RangeOf(const TarEntry& e) {
    return {static_cast<int64_t>(e.payload.data_offset), static_cast<int64_t>(e.payload.size)};
  }
  void CheckLength(int64_t index, size_t got) const {
    const TarEntry& e = entries_[static_cast<size_t>(index)];
    if (got != e.payload.size) {
      throw DatasetCorrupt(Name(index) + ": " + std::to_string(e.payload.size) + " bytes at byte " +
                           std::to_string(e.payload.data_offset) + " came back " + std::to_string(got) +
                           " bytes long (the object changed since it was indexed)");
    }
  }
  // Each shard's two end-of-archive blocks, fetched together.
  void CheckEnds(const std::vector<std::vector<workloads::TarMember>>& members) const {
    std::vector<std::vector<std::byte>> tails(shards_.size());
    std::vector<storage::GetRequest> requests;
    std::vector<size_t> asked;
    for (size_t s = 0; s < shards_.size(); ++s) {
      std::string last;
      const uint64_t end = TarMembersEnd(members[s], &last);
      if (static_cast<uint64_t>(shards_[s].bytes) < end + 2 * workloads::kTarBlock) continue;  // too short: no tail
      tails[s].resize(2 * workloads::kTarBlock);
      requests.push_back({shards_[s].key, storage::ByteRange{static_cast<int64_t>(end), 2 * workloads::kTarBlock},
                          tails[s]});
      asked.push_back(s);
    }
    if (!requests.empty()) client_.Get().GetMany(requests, kReadAheadInFlight);
    for (size_t s = 0; s < shards_.size(); ++s) CheckTarEnd(shards_[s].name, shards_[s].bytes, members[s], tails[s]);
  }

  const storage::ProcessClient client_;
  std::vector<workloads::RemoteTarDataset::Shard> shards_;
  std::vector<TarEntry> entries_;
  int64_t total_ = 0;
  int64_t fixed_ = 0;
  mutable std::map<int64_t, std::vector<std::byte>> ahead_;  // fetched by WillRead, not yet read
};

// HDF5 labels: every row of the dataset `name`, an integer per sample.
std::vector<int64_t> ReadHdf5Labels(const std::string& path, const std::string& name, int64_t samples) {
  workloads::FilesOptions files;
  files.path = path;
  workloads::FormatOptions format;
  format.dataset = name;
  const workloads::Hdf5Dataset labels(files, format, NoSourceCost(), workloads::CpuCalibration{});
  const workloads::Hdf5DatasetInfo& info = labels.images();
  const bool integer = info.dtype.starts_with("int") || info.dtype.starts_with("uint");
  if (!integer || info.row_bytes != info.item_bytes || info.item_bytes > 8) {
    throw std::invalid_argument("--labels " + name + ": " + path + " " + name + " is " + info.dtype + " of shape " +
                                info.ShapeText() + "; labels are one integer per sample");
  }
  if (info.rows() < samples) {
    throw DatasetCorrupt(path + ": " + name + " has " + std::to_string(info.rows()) + " rows for " +
                         std::to_string(samples) + " samples");
  }
  const bool is_signed = info.dtype.starts_with("int");
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(samples));
  std::vector<std::byte> row(8);
  for (int64_t i = 0; i < samples; ++i) {
    labels.Read(i, row);
    uint64_t raw = 0;
    std::memcpy(&raw, row.data(), static_cast<size_t>(info.item_bytes));  // little-endian hosts only, as HDF5's native
    const int bits = static_cast<int>(info.item_bytes * 8);
    int64_t value = static_cast<int64_t>(raw);
    if (is_signed && bits < 64 && (raw >> (bits - 1)) & 1) value = static_cast<int64_t>(raw | (~uint64_t{0} << bits));
    out.push_back(value);
  }
  return out;
}

// A chunk cache that holds one chunk of `name`: convert reads rows in order,
// and with HDF5's default 1 MiB a compressed chunk larger than that (the
// chunk trap) would be inflated again for every row of it.
int64_t Hdf5CacheMbForOneChunk(const std::string& path, const std::string& name) {
  for (const auto& info : workloads::Hdf5Dataset::ListDatasets(path)) {
    if (info.name == name) {
      return std::max<int64_t>(workloads::kHdf5DefaultChunkCacheMb, info.chunk_bytes() / (int64_t{1} << 20) + 1);
    }
  }
  return workloads::kHdf5DefaultChunkCacheMb;
}

bool Hdf5HasDataset(const std::string& path, const std::string& name) {
  for (const auto& info : workloads::Hdf5Dataset::ListDatasets(path)) {
    if (info.name == name) return true;
  }
  return false;
}

void RefuseLabels(const SourceOptions& options, const std::string& path, const char* kind) {
  if (options.labels != "auto" && options.labels != "none") {
    throw std::invalid_argument("--labels " + options.labels + ": " + path + " is " + kind +
                                ", which has no labels feedtune reads; use --labels none (or leave it out)");
  }
}

// Tar shards' labels are their .cls members: --labels folder or an HDF5
// dataset does not fit them.
void RefuseTarLabels(const SourceOptions& options, const std::string& path) {
  if (options.labels == "folder" || options.labels.starts_with("/")) {
    throw std::invalid_argument("--labels " + options.labels + ": " + path + " is tar shards, whose labels are their "
                                ".cls members; use --labels cls (or auto, which takes them where every sample has "
                                "one) or none");
  }
}

// One object per sample under an s3:// prefix (RemoteDataset: the prefix
// listed once, in key order; a console's 0-byte "folders" left out), named
// s3://bucket/key. A read is a round trip, so WillRead fetches the samples
// about to be read together, kReadAheadInFlight GETs in flight, and Read
// takes them from there.
class RemoteObjectsSource final : public SampleSource {
 public:
  static constexpr int kReadAheadInFlight = 16;
  static constexpr int64_t kReadAheadBytes = int64_t{64} << 20;

  // Lists `path`; its labels come after, from LabelByFolder (an ImageFolder
  // tree), once the listing has told that its objects are not tar shards.
  explicit RemoteObjectsSource(const std::string& path) {
    workloads::FilesOptions files;
    files.path = path;
    files.layout = workloads::FilesLayout::kFiles;
    dataset_ = std::make_unique<workloads::RemoteDataset>(files, NoSourceCost(), workloads::CpuCalibration{},
                                                          storage::ProcessEnvironment());
    kind_ = "folder";
    root_ = path;
    const storage::Location& at = dataset_->location();
    std::string prefix = at.prefix;
    if (!prefix.empty() && prefix.back() != '/') prefix += '/';
    std::vector<std::string> relative;
    int64_t fixed = dataset_->objects().front().size;
    for (const storage::ObjectInfo& o : dataset_->objects()) {
      names_.push_back("s3://" + at.bucket + "/" + o.key);
      relative.push_back(o.key.substr(std::min(prefix.size(), o.key.size())));
      if (o.size != fixed) fixed = 0;
    }
    fixed_ = fixed;
    extension_ = SharedExtension(relative);
    relative_ = relative;
  }
  // --labels folder: the class of each object from the first folder of its key under the prefix.
  void LabelByFolder() {
    kind_ = "imagefolder";
    labels_ = ImageFolderLabels(relative_, names_, root_);
  }
  int64_t size() const override { return dataset_->size(); }
  void Read(int64_t index, std::vector<std::byte>* bytes) const override {
    if (auto it = ahead_.find(index); it != ahead_.end()) {
      *bytes = std::move(it->second);
      ahead_.erase(it);
      return;
    }
    bytes->resize(static_cast<size_t>(dataset_->objects()[static_cast<size_t>(index)].size));
    bytes->resize(static_cast<size_t>(dataset_->Read(index, *bytes)));
  }
  void WillRead(std::span<const int64_t> indices) const override {
    ahead_.clear();  // what was fetched and not read is not read now
    std::vector<int64_t> batch;
    int64_t bytes = 0;
    for (int64_t i : indices) {
      const int64_t size = dataset_->objects()[static_cast<size_t>(i)].size;
      if (!batch.empty() && bytes + size > kReadAheadBytes) break;
      batch.push_back(i);
      bytes += size;
    }
    if (batch.empty()) return;
    const int64_t stride = std::max<int64_t>(1, dataset_->max_sample_bytes());
    std::vector<std::byte> slot(static_cast<size_t>(stride) * batch.size());
    std::vector<int64_t> got(batch.size());
    dataset_->ReadMany(batch, slot, stride, kReadAheadInFlight, got);
    for (size_t k = 0; k < batch.size(); ++k) {
      const auto* first = slot.data() + k * static_cast<size_t>(stride);
      ahead_[batch[k]].assign(first, first + got[k]);
    }
  }
  std::string Name(int64_t index) const override { return names_[static_cast<size_t>(index)]; }
  int64_t total_bytes() const override { return dataset_->total_bytes(); }
  int64_t fixed_sample_bytes() const override { return fixed_; }
  std::string copy_name(int64_t index) const override { return relative_[static_cast<size_t>(index)]; }

 private:
  std::unique_ptr<workloads::RemoteDataset> dataset_;
  std::vector<std::string> names_;
  std::vector<std::string> relative_;  // each key after the prefix
  int64_t fixed_ = 0;
  mutable std::map<int64_t, std::vector<std::byte>> ahead_;  // fetched by WillRead, not yet read
};

// Some samples of another source, renumbered.
class SubsetSource final : public SampleSource {
 public:
  SubsetSource(const SampleSource& source, std::vector<int64_t> indices)
      : source_(source), indices_(std::move(indices)) {
    kind_ = source.kind();
    root_ = source.root();
    extension_ = source.payload_extension();
    if (source.has_labels()) {
      for (int64_t i : indices_) labels_.push_back(source.label(i));
    }
    const double mean = static_cast<double>(source.total_bytes()) / static_cast<double>(source.size());
    total_ = source.fixed_sample_bytes() > 0 ? source.fixed_sample_bytes() * size()
                                             : static_cast<int64_t>(mean * static_cast<double>(size()));
  }
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  void Read(int64_t index, std::vector<std::byte>* bytes) const override { source_.Read(At(index), bytes); }
  void WillRead(std::span<const int64_t> indices) const override {
    std::vector<int64_t> theirs;
    for (int64_t i : indices) theirs.push_back(At(i));
    source_.WillRead(theirs);
  }
  std::string Name(int64_t index) const override { return source_.Name(At(index)); }
  int64_t total_bytes() const override { return total_; }
  int64_t fixed_sample_bytes() const override { return source_.fixed_sample_bytes(); }
  std::string copy_name(int64_t index) const override { return source_.copy_name(At(index)); }
  int64_t shard_count() const override { return source_.shard_count(); }

 private:
  int64_t At(int64_t index) const { return indices_[static_cast<size_t>(index)]; }
  const SampleSource& source_;
  const std::vector<int64_t> indices_;
  int64_t total_ = 0;
};

// JPEG samples decoded once into raw pixels (PPM): `convert --pixels`.
class DecodedPixelsSource final : public SampleSource {
 public:
  explicit DecodedPixelsSource(const SampleSource& source) : source_(source) {
    kind_ = source.kind();
    root_ = source.root();
    extension_ = "ppm";
    if (source.has_labels()) {
      for (int64_t i = 0; i < source.size(); ++i) labels_.push_back(source.label(i));
    }
    total_ = EstimateTotal();
  }
  int64_t size() const override { return source_.size(); }
  void Read(int64_t index, std::vector<std::byte>* bytes) const override {
    std::vector<std::byte> jpeg;
    source_.Read(index, &jpeg);
    try {
      *bytes = workloads::DecodeToPpm(jpeg);
    } catch (const workloads::JpegError& e) {
      throw std::runtime_error(source_.Name(index) + ": does not decode as a JPEG: " + e.what());
    }
  }
  void WillRead(std::span<const int64_t> indices) const override { source_.WillRead(indices); }
  std::string Name(int64_t index) const override { return source_.Name(index); }
  int64_t total_bytes() const override { return total_; }
  // Images may differ in size: the pixels are for the layouts that hold any size.
  int64_t fixed_sample_bytes() const override { return 0; }
  std::string copy_name(int64_t index) const override { return source_.copy_name(index); }

 private:
  // The pixels of the whole source from the headers of up to 64 samples
  // spread over it (reading every image's header would read every file):
  // an estimate, for the free-space check and the progress line.
  int64_t EstimateTotal() const {
    const std::vector<int64_t> probe = SpreadIndices(source_.size(), 64);
    source_.WillRead(probe);  // a store's objects fetched together, not a round trip each
    double pixel_bytes = 0;
    int64_t probed = 0;
    std::vector<std::byte> jpeg;
    for (int64_t i : probe) {
      try {
        source_.Read(i, &jpeg);
        const workloads::JpegHeader h = workloads::ReadJpegHeader(jpeg);
        pixel_bytes += 3.0 * h.width * h.height + 16;
        ++probed;
      } catch (const std::exception&) {
        // a bad sample is named when it is converted
      }
    }
    if (probed == 0) return source_.total_bytes();
    return static_cast<int64_t>(pixel_bytes / static_cast<double>(probed) * static_cast<double>(source_.size()));
  }
  const SampleSource& source_;
  int64_t total_ = 0;
};

}  // namespace

std::vector<int64_t> SpreadIndices(int64_t n, int64_t k) {
  k = std::clamp<int64_t>(k, 0, n);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) {
    out.push_back(i * n / k);  // i, n <= 10^8 samples (gen-data's bound): no overflow
  }
  return out;
}

std::unique_ptr<SampleSource> SubsetOf(const SampleSource& source, std::vector<int64_t> indices) {
  return std::make_unique<SubsetSource>(source, std::move(indices));
}

std::unique_ptr<SampleSource> DecodedPixelsOf(const SampleSource& source) {
  if (source.payload_extension() != "jpg") {
    throw std::invalid_argument("--pixels decodes JPEG samples; the samples of " + source.root() + " are '" +
                                source.payload_extension() + "', not JPEGs");
  }
  return std::make_unique<DecodedPixelsSource>(source);
}

std::unique_ptr<SampleSource> OpenSource(const std::string& path, const SourceOptions& options) {
  const auto cost = NoSourceCost();
  const workloads::CpuCalibration calibration{};
  workloads::FilesOptions files;
  files.path = path;
  const bool folder_labels = options.labels == "folder";
  const bool hdf5_labels = options.labels.starts_with("/");
  const bool known = options.labels == "auto" || options.labels == "none" || folder_labels || hdf5_labels ||
                     options.labels == "cls";
  if (!known) {
    throw std::invalid_argument("--labels: expected auto, none, folder, cls or /NAME (an HDF5 dataset), got '" +
                                options.labels + "'");
  }
  if (workloads::IsRemotePath(path)) {
    const storage::Location at = storage::ParseLocation(path);  // throws invalid_argument, naming what is wrong
    if (!at.is_s3()) {
      throw std::invalid_argument("SRC " + path + ": a web server gives no listing; convert reads an s3:// prefix "
                                  "of one object per sample, or a local dataset");
    }
    auto objects = std::make_unique<RemoteObjectsSource>(path);
    if (objects->payload_extension() == "tar") {
      RefuseTarLabels(options, path);
      return std::make_unique<RemoteTarSource>(path, options);
    }
    if (hdf5_labels || options.labels == "cls") RefuseLabels(options, path, "an s3:// prefix of objects");
    if (folder_labels) objects->LabelByFolder();
    return objects;
  }
  std::error_code ec;
  if (fs::is_directory(path, ec) && fs::exists(fs::path(path) / workloads::kIndexFileName, ec)) {
    RefuseLabels(options, path, "a folder of feedtune shards");
    files.layout = workloads::FilesLayout::kShards;
    auto dataset = std::make_unique<workloads::FilesDataset>(files, cost, calibration);
    const int64_t total = dataset->total_bytes();
    auto source = std::make_unique<DatasetSource>(std::move(dataset), path + " record ", "shards", path);
    source->SetSizes(total, 0);
    return source;
  }
  switch (workloads::DetectFormat(path)) {
    case workloads::DetectedFormat::kJpegDir: {
      if (hdf5_labels || options.labels == "cls") RefuseLabels(options, path, "a folder of files");
      files.layout = workloads::FilesLayout::kFiles;
      auto source = std::make_unique<FolderSource>(std::make_unique<workloads::FilesDataset>(files, cost, calibration),
                                                   path);
      if (folder_labels) source->LabelByFolder();
      return source;
    }
    case workloads::DetectedFormat::kNpy: {
      RefuseLabels(options, path, "a .npy file");
      auto dataset = std::make_unique<workloads::NpyDataset>(files, cost, calibration);
      const int64_t row = dataset->header().sample_bytes;
      const int64_t rows = dataset->size();
      auto source = std::make_unique<DatasetSource>(std::move(dataset), path + " row ", "npy", path);
      source->SetSizes(row * rows, row);
      return source;
    }
    case workloads::DetectedFormat::kHdf5: {
      if (folder_labels || options.labels == "cls") RefuseLabels(options, path, "an HDF5 file");
      workloads::FormatOptions format;
      format.dataset = options.dataset;
      format.hdf5_chunk_cache_mb = Hdf5CacheMbForOneChunk(path, options.dataset);
      auto dataset = std::make_unique<workloads::Hdf5Dataset>(files, format, cost, calibration);
      const int64_t row = dataset->images().row_bytes;
      const int64_t rows = dataset->size();
      auto source =
          std::make_unique<DatasetSource>(std::move(dataset), path + " " + options.dataset + " row ", "hdf5", path);
      source->SetSizes(row * rows, row);
      std::string labels = hdf5_labels ? options.labels : "";
      if (options.labels == "auto" && options.dataset != "/labels" && Hdf5HasDataset(path, "/labels")) {
        labels = "/labels";
      }
      if (!labels.empty()) source->SetLabels(ReadHdf5Labels(path, labels, rows));
      return source;
    }
    case workloads::DetectedFormat::kLmdb: {
      RefuseLabels(options, path, "an LMDB environment");
      auto dataset = std::make_unique<workloads::LmdbDataset>(files, workloads::FormatOptions{}, cost, calibration);
      const workloads::LmdbInfo info = dataset->info();
      auto source = std::make_unique<DatasetSource>(std::move(dataset), path + " value ", "lmdb", path);
      source->SetSizes(info.total_value_bytes,
                       info.min_value_bytes == info.max_value_bytes ? info.max_value_bytes : 0);
      return source;
    }
    case workloads::DetectedFormat::kTfRecord: {
      RefuseLabels(options, path, "TFRecord shards");
      workloads::FormatOptions format;
      format.feature = options.feature;
      auto dataset = std::make_unique<workloads::TfRecordDataset>(files, format, cost, calibration);
      int64_t total = 0;
      for (const auto& shard : dataset->shards()) total += shard.file_bytes;
      auto source = std::make_unique<DatasetSource>(std::move(dataset), path + " record ", "tfrecord", path);
      source->SetSizes(total, 0);
      return source;
    }
    case workloads::DetectedFormat::kTar:
      RefuseTarLabels(options, path);
      return std::make_unique<TarSource>(path, options);
  }
  throw DatasetNotFound(path + ": not a dataset feedtune reads");
}

workloads::SyntheticOptions NoSourceCost() {
  workloads::SyntheticOptions cost;
  cost.cpu_us_per_sample = 0;
  cost.jitter = 0;
  cost.torch_costs = workloads::TorchCostsMode::kOff;
  return cost;
}

}  // namespace feedtune::layout

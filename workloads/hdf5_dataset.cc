#include "workloads/hdf5_dataset.h"

#include <fcntl.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "workloads/format_io.h"
#include "workloads/shard_format.h"

namespace feedtune::workloads {
namespace {

// Owns one HDF5 id; closes it with the function that matches its kind.
class H5Id {
 public:
  H5Id() = default;
  H5Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  H5Id(H5Id&& other) noexcept : id_(other.id_), close_(other.close_) { other.id_ = H5I_INVALID_HID; }
  H5Id& operator=(H5Id&& other) noexcept {
    if (this != &other) {
      Reset();
      id_ = other.id_;
      close_ = other.close_;
      other.id_ = H5I_INVALID_HID;
    }
    return *this;
  }
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  ~H5Id() { Reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  void Reset() {
    if (id_ >= 0 && close_ != nullptr) close_(id_);  // an error here has no one to go to
    id_ = H5I_INVALID_HID;
  }
  hid_t id_ = H5I_INVALID_HID;
  herr_t (*close_)(hid_t) = nullptr;
};

// Turns off HDF5's printing of its error stack to stderr for this thread (the
// setting is per thread in a thread-safe build) while in scope; the errors are
// read with ErrorText() and carried in exceptions instead.
class QuietErrors {
 public:
  QuietErrors() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  QuietErrors(const QuietErrors&) = delete;
  QuietErrors& operator=(const QuietErrors&) = delete;
  ~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// The descriptions on HDF5's error stack, innermost first, for a message.
std::string ErrorText() {
  std::vector<std::string> lines;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned, const H5E_error2_t* error, void* data) -> herr_t {
        auto* out = static_cast<std::vector<std::string>*>(data);
        if (error->desc != nullptr && error->desc[0] != '\0' && out->size() < 3 &&
            std::find(out->begin(), out->end(), error->desc) == out->end()) {
          out->emplace_back(error->desc);
        }
        return 0;
      },
      &lines);
  std::string text;
  for (const std::string& line : lines) text += (text.empty() ? "" : "; ") + line;
  return text.empty() ? "HDF5 gave no reason" : "HDF5: " + text;
}

std::string DtypeText(hid_t type, int64_t* item_bytes, bool* fixed_size) {
  const H5T_class_t cls = H5Tget_class(type);
  const auto size = static_cast<int64_t>(H5Tget_size(type));
  *item_bytes = size;
  *fixed_size = true;
  switch (cls) {
    case H5T_INTEGER:
      return std::string(H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int") + std::to_string(size * 8);
    case H5T_FLOAT:
      return "float" + std::to_string(size * 8);
    case H5T_STRING:
      if (H5Tis_variable_str(type) > 0) {
        *fixed_size = false;
        return "string (variable length)";
      }
      return "string[" + std::to_string(size) + "]";
    case H5T_BITFIELD: return "bitfield" + std::to_string(size * 8);
    case H5T_OPAQUE: return "opaque[" + std::to_string(size) + "]";
    case H5T_COMPOUND: return "compound[" + std::to_string(size) + " bytes]";
    case H5T_ENUM: return "enum[" + std::to_string(size) + " bytes]";
    case H5T_ARRAY: return "array[" + std::to_string(size) + " bytes]";
    case H5T_REFERENCE:
      *fixed_size = false;
      return "reference";
    case H5T_VLEN:
      *fixed_size = false;
      return "variable-length";
    default: return "unknown type";
  }
}

// Opens the file read-only. DatasetNotFound when it is missing or not HDF5 at
// all; DatasetCorrupt when HDF5 recognises it but cannot open it (truncated).
H5Id OpenFile(const std::string& path) {
  struct stat st {};
  if (path.empty()) throw DatasetNotFound("workload.path is empty: name the HDF5 file");
  if (::stat(path.c_str(), &st) != 0) throw DatasetNotFound(path + ": cannot open: " + ErrnoText(errno));
  if (S_ISDIR(st.st_mode)) throw DatasetNotFound(path + ": a directory; workload.path names the HDF5 file");
  const QuietErrors quiet;
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());  // H5Fis_accessible is 1.12+
  if (is_hdf5 == 0) throw DatasetNotFound(path + ": not an HDF5 file (no HDF5 signature)");
  H5Id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.valid()) {
    throw DatasetCorrupt(path + ": cannot open as HDF5 (" + ErrorText() +
                         "); the file may be truncated or damaged: copy it again");
  }
  return file;
}

Hdf5DatasetInfo DescribeOpen(hid_t dataset, const std::string& name, const std::string& path) {
  Hdf5DatasetInfo info;
  info.name = name;
  const H5Id space(H5Dget_space(dataset), H5Sclose);
  const H5Id type(H5Dget_type(dataset), H5Tclose);
  const H5Id dcpl(H5Dget_create_plist(dataset), H5Pclose);
  if (!space.valid() || !type.valid() || !dcpl.valid()) {
    throw DatasetCorrupt(path + ": dataset '" + name + "': cannot read its description (" + ErrorText() + ")");
  }
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) throw DatasetCorrupt(path + ": dataset '" + name + "': cannot read its shape (" + ErrorText() + ")");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  for (hsize_t d : dims) info.dims.push_back(static_cast<int64_t>(d));
  info.dtype = DtypeText(type.get(), &info.item_bytes, &info.fixed_size);
  if (H5Pget_layout(dcpl.get()) == H5D_CHUNKED && rank > 0) {
    std::vector<hsize_t> chunk(static_cast<size_t>(rank));
    if (H5Pget_chunk(dcpl.get(), rank, chunk.data()) == rank) {
      for (hsize_t c : chunk) info.chunk.push_back(static_cast<int64_t>(c));
    }
  }
  const int filters = H5Pget_nfilters(dcpl.get());
  for (int f = 0; f < filters; ++f) {
    unsigned flags = 0, config = 0;
    size_t values = 8;
    unsigned cd[8] = {};
    char filter_name[64] = {};
    const H5Z_filter_t id =
        H5Pget_filter2(dcpl.get(), static_cast<unsigned>(f), &flags, &values, cd, sizeof filter_name, filter_name, &config);
    std::string text = id == H5Z_FILTER_DEFLATE ? "gzip" : id == H5Z_FILTER_SHUFFLE ? "shuffle"
                       : id == H5Z_FILTER_FLETCHER32 ? "fletcher32" : id == H5Z_FILTER_SZIP ? "szip"
                       : filter_name[0] != '\0' ? std::string(filter_name) : "filter " + std::to_string(id);
    if (id == H5Z_FILTER_DEFLATE && values >= 1) text += "(" + std::to_string(cd[0]) + ")";
    info.filters.push_back(text);
  }
  info.stored_bytes = static_cast<int64_t>(H5Dget_storage_size(dataset));
  int64_t row = info.item_bytes;
  for (size_t d = 1; d < info.dims.size(); ++d) {
    if (info.dims[d] != 0 && row > (int64_t{1} << 40) / info.dims[d]) {
      row = int64_t{1} << 40;
      break;
    }
    row *= info.dims[d];
  }
  info.row_bytes = row;
  return info;
}

// The datasets of an open file, by full name.
std::vector<std::string> DatasetNames(hid_t file) {
  std::vector<std::string> names;
  H5Ovisit2(
      file, H5_INDEX_NAME, H5_ITER_INC,
      [](hid_t, const char* name, const H5O_info_t* info, void* data) -> herr_t {
        if (info->type == H5O_TYPE_DATASET) static_cast<std::vector<std::string>*>(data)->push_back(std::string("/") + name);
        return 0;
      },
      &names, H5O_INFO_BASIC);
  return names;
}

// Opens dataset `name` with a chunk cache of `cache_mb` MiB (negative: HDF5's default).
H5Id OpenDataset(hid_t file, const std::string& name, const std::string& path, int64_t cache_mb,
                 int64_t chunk_bytes_hint) {
  H5Id dapl(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose);
  if (cache_mb >= 0 && cache_mb != kHdf5DefaultChunkCacheMb) {
    // HDF5 asks for a prime number of hash slots, about 100 per chunk that fits.
    const int64_t bytes = cache_mb << 20;
    int64_t slots = std::max<int64_t>(521, chunk_bytes_hint > 0 ? bytes / chunk_bytes_hint * 100 : 521);
    slots = std::min<int64_t>(slots, 1'000'003);
    const auto is_prime = [](int64_t n) {
      for (int64_t d = 2; d * d <= n; ++d) {
        if (n % d == 0) return false;
      }
      return n >= 2;
    };
    while (!is_prime(slots)) ++slots;
    H5Pset_chunk_cache(dapl.get(), static_cast<size_t>(slots), static_cast<size_t>(bytes), H5D_CHUNK_CACHE_W0_DEFAULT);
  }
  const QuietErrors quiet;
  H5Id dataset(H5Dopen2(file, name.c_str(), dapl.get()), H5Dclose);
  if (!dataset.valid()) {
    const std::vector<std::string> names = DatasetNames(file);
    std::string held;
    for (const std::string& n : names) held += (held.empty() ? "" : ", ") + n;
    throw DatasetNotFound(path + ": no dataset '" + name + "' in the file; it holds " +
                          (held.empty() ? std::string("no datasets") : held) + " (set workload.dataset)");
  }
  return dataset;
}

}  // namespace

int64_t Hdf5DatasetInfo::chunk_bytes() const {
  if (chunk.empty()) return 0;
  int64_t bytes = item_bytes;
  for (int64_t c : chunk) bytes *= c;
  return bytes;
}

std::string Hdf5DatasetInfo::ShapeText() const {
  std::string out = "(";
  for (size_t i = 0; i < dims.size(); ++i) out += (i > 0 ? ", " : "") + std::to_string(dims[i]);
  return out + (dims.size() == 1 ? ",)" : ")");
}

// One process's open handles. Destroyed (closing them) only by that process.
struct Hdf5Dataset::Handles {
  H5Id file;
  H5Id images;
  H5Id images_type;
  H5Id images_file_space;
  H5Id images_mem_space;
  H5Id labels;
  H5Id labels_type;
  H5Id labels_file_space;
  H5Id labels_mem_space;
};

Hdf5Dataset::Hdf5Dataset(const FilesOptions& files, const FormatOptions& format, const SyntheticOptions& cost,
                         const CpuCalibration& calibration)
    : files_(files), format_(format), cost_(cost, calibration) {
  const std::string& path = files_.path;
  const auto check = [&](const Hdf5DatasetInfo& info, const char* key) {
    const std::string where = path + ": dataset '" + info.name + "' (workload." + key + ")";
    if (info.dims.empty()) {
      throw DatasetCorrupt(where + " is a scalar (rank 0): it has no axis 0 to take samples along");
    }
    if (!info.fixed_size) {
      throw DatasetCorrupt(where + " has elements of type " + info.dtype +
                           ", without a fixed size: feedtune reads fixed-size rows");
    }
    if (info.rows() == 0) throw DatasetCorrupt(where + " has no rows (shape " + info.ShapeText() + ")");
    if (info.row_bytes == 0) throw DatasetCorrupt(where + " has empty rows (shape " + info.ShapeText() + ")");
    if (info.row_bytes > (int64_t{1} << 30)) {
      throw DatasetCorrupt(where + ": one row of shape " + info.ShapeText() + " is larger than 1 GiB");
    }
  };
  {
    // Opened to check, closed at the end of this block, before any fork.
    const H5Id file = OpenFile(path);
    {
      const H5Id images = OpenDataset(file.get(), format_.dataset, path, -1, 0);
      images_ = DescribeOpen(images.get(), format_.dataset, path);
    }
    check(images_, "dataset");
    if (!format_.labels.empty()) {
      const H5Id labels = OpenDataset(file.get(), format_.labels, path, -1, 0);
      labels_ = DescribeOpen(labels.get(), format_.labels, path);
      check(labels_, "labels");
      if (labels_.rows() < images_.rows()) {
        throw DatasetCorrupt(path + ": dataset '" + labels_.name + "' (workload.labels) has " +
                             std::to_string(labels_.rows()) + " rows, fewer than the " +
                             std::to_string(images_.rows()) + " samples of '" + images_.name + "'");
      }
    }
  }
}

Hdf5Dataset::~Hdf5Dataset() {
  // A forked copy's handles belong to the process that opened them: leave them.
  if (handles_ != nullptr && handles_pid_ != ::getpid()) (void)handles_.release();
}

Hdf5Dataset::Handles& Hdf5Dataset::HandlesForThisProcess() const {
  const pid_t pid = ::getpid();
  if (handles_ != nullptr && handles_pid_ == pid) return *handles_;
  // A copy inherited through fork: closing it here would act on the parent's
  // library state, so it is dropped untouched (its memory is this process's copy).
  if (handles_ != nullptr) (void)handles_.release();
  auto handles = std::make_unique<Handles>();
  handles->file = OpenFile(files_.path);
  const auto open = [&](const Hdf5DatasetInfo& info, H5Id* dataset, H5Id* type, H5Id* file_space,
                        H5Id* mem_space) {
    *dataset = OpenDataset(handles->file.get(), info.name, files_.path, format_.hdf5_chunk_cache_mb,
                           info.chunk_bytes());
    *type = H5Id(H5Dget_type(dataset->get()), H5Tclose);
    *file_space = H5Id(H5Dget_space(dataset->get()), H5Sclose);
    std::vector<hsize_t> row(info.dims.begin(), info.dims.end());
    row[0] = 1;
    *mem_space = H5Id(H5Screate_simple(static_cast<int>(row.size()), row.data(), nullptr), H5Sclose);
    if (!type->valid() || !file_space->valid() || !mem_space->valid()) {
      throw DatasetCorrupt(files_.path + ": dataset '" + info.name + "': cannot prepare reads (" + ErrorText() + ")");
    }
  };
  open(images_, &handles->images, &handles->images_type, &handles->images_file_space, &handles->images_mem_space);
  if (!labels_.name.empty()) {
    open(labels_, &handles->labels, &handles->labels_type, &handles->labels_file_space, &handles->labels_mem_space);
  }
  handles_ = std::move(handles);
  handles_pid_ = pid;
  return *handles_;
}

int64_t Hdf5Dataset::Read(int64_t index, std::span<std::byte> out) const {
  if (index < 0 || index >= size()) {
    throw std::out_of_range("sample index " + std::to_string(index) + " outside [0, " + std::to_string(size()) + ")");
  }
  const int64_t bytes = max_sample_bytes();
  if (static_cast<int64_t>(out.size()) < bytes) {
    throw std::length_error("sample " + std::to_string(index) + " needs " + std::to_string(bytes) +
                            " bytes, the slot has " + std::to_string(out.size()));
  }
  cost_.BeforeRead(index);
  {
    const std::lock_guard lock(mu_);
    const QuietErrors quiet;
    Handles& h = HandlesForThisProcess();
    const auto read_row = [&](const Hdf5DatasetInfo& info, const H5Id& dataset, const H5Id& type,
                              const H5Id& file_space, const H5Id& mem_space, std::byte* into) {
      std::vector<hsize_t> start(info.dims.size(), 0), count(info.dims.begin(), info.dims.end());
      start[0] = static_cast<hsize_t>(index);
      count[0] = 1;
      if (H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0 ||
          H5Dread(dataset.get(), type.get(), mem_space.get(), file_space.get(), H5P_DEFAULT, into) < 0) {
        throw DatasetCorrupt(files_.path + ": dataset '" + info.name + "', sample " + std::to_string(index) +
                             ": read failed (" + ErrorText() + ")");
      }
    };
    read_row(images_, h.images, h.images_type, h.images_file_space, h.images_mem_space, out.data());
    if (!labels_.name.empty()) {
      read_row(labels_, h.labels, h.labels_type, h.labels_file_space, h.labels_mem_space,
               out.data() + images_.row_bytes);
    }
  }
  cost_.AfterRead(index, out.first(static_cast<size_t>(bytes)));
  return bytes;
}

loader::RepeatPreparation Hdf5Dataset::BeforeRepeat() const {
  if (files_.cache != CacheMode::kCold) return {};
  return EvictFromPageCache({files_.path});
}

std::string Hdf5Dataset::Describe() const {
  std::string text = files_.path + ": dataset '" + images_.name + "' " + images_.ShapeText() + " " + images_.dtype;
  text += images_.chunk.empty() ? ", contiguous" : ", chunks of " + std::to_string(images_.chunk_rows()) + " samples";
  for (const std::string& f : images_.filters) text += ", " + f;
  if (!labels_.name.empty()) text += ", labels '" + labels_.name + "' " + labels_.dtype;
  text += "; " + std::to_string(size()) + " samples of " + std::to_string(max_sample_bytes()) + " bytes";
  text += ", chunk cache " + std::to_string(format_.hdf5_chunk_cache_mb) + " MiB per dataset per process" +
          (format_.hdf5_chunk_cache_mb == kHdf5DefaultChunkCacheMb ? " (HDF5's default)" : "");
  text += ", opened in each worker after fork, cache " + std::string(CacheModeName(files_.cache));
  return text;
}

std::vector<Hdf5DatasetInfo> Hdf5Dataset::ListDatasets(const std::string& path) {
  const H5Id file = OpenFile(path);
  std::vector<Hdf5DatasetInfo> out;
  for (const std::string& name : DatasetNames(file.get())) {
    const H5Id dataset = OpenDataset(file.get(), name, path, -1, 0);
    out.push_back(DescribeOpen(dataset.get(), name, path));
  }
  return out;
}

int64_t Hdf5Dataset::OpenObjectsInThisProcess() {
  return static_cast<int64_t>(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL));
}

std::string Hdf5Dataset::LibraryVersion() {
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
}

// ---------------------------------------------------------------------------
// The writer.

struct Hdf5Writer::Handles {
  H5Id file;
  H5Id images;
  H5Id labels;
};

Hdf5Writer::Hdf5Writer(std::string path, int64_t samples, int64_t sample_bytes, int64_t chunk_samples, int gzip_level)
    : path_(std::move(path)),
      samples_(samples),
      sample_bytes_(sample_bytes),
      chunk_samples_(std::min(chunk_samples, samples)) {
  if (samples < 1 || sample_bytes < 1 || chunk_samples < 1) {
    throw std::invalid_argument("Hdf5Writer: samples, sample_bytes and chunk_samples must be >= 1");
  }
  if (chunk_samples_ * sample_bytes_ >= (int64_t{1} << 32)) {
    throw std::invalid_argument("--chunk-samples " + std::to_string(chunk_samples) + " x --sample-bytes " +
                                std::to_string(sample_bytes) + " is 4 GiB or more, HDF5's limit for one chunk");
  }
  if (gzip_level > 9) throw std::invalid_argument("gzip level " + std::to_string(gzip_level) + " (expected 1-9)");
  const QuietErrors quiet;
  handles_ = std::make_unique<Handles>();
  handles_->file = H5Id(H5Fcreate(path_.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (!handles_->file.valid()) {
    struct stat st {};
    const bool exists = ::stat(path_.c_str(), &st) == 0;
    handles_.reset();
    finished_ = true;  // nothing of ours to remove
    throw std::runtime_error(path_ + ": cannot create (" + (exists ? std::string("it exists; choose another --out or remove it")
                                                                   : ErrorText()) + ")");
  }
  const hsize_t dims[2] = {static_cast<hsize_t>(samples_), static_cast<hsize_t>(sample_bytes_)};
  const hsize_t chunk[2] = {static_cast<hsize_t>(chunk_samples_), static_cast<hsize_t>(sample_bytes_)};
  const H5Id space(H5Screate_simple(2, dims, nullptr), H5Sclose);
  const H5Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_chunk(dcpl.get(), 2, chunk);
  if (gzip_level >= 0) H5Pset_deflate(dcpl.get(), static_cast<unsigned>(gzip_level));
  handles_->images =
      H5Id(H5Dcreate2(handles_->file.get(), "/images", H5T_STD_U8LE, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
           H5Dclose);
  const hsize_t label_dims[1] = {static_cast<hsize_t>(samples_)};
  const H5Id label_space(H5Screate_simple(1, label_dims, nullptr), H5Sclose);
  handles_->labels = H5Id(H5Dcreate2(handles_->file.get(), "/labels", H5T_STD_I64LE, label_space.get(), H5P_DEFAULT,
                                     H5P_DEFAULT, H5P_DEFAULT),
                          H5Dclose);
  if (!handles_->images.valid() || !handles_->labels.valid()) {
    throw std::runtime_error(path_ + ": cannot create the datasets (" + ErrorText() + ")");
  }
  pending_.reserve(static_cast<size_t>(chunk_samples_ * sample_bytes_));
}

Hdf5Writer::~Hdf5Writer() {
  handles_.reset();
  if (!finished_) ::unlink(path_.c_str());
}

void Hdf5Writer::Flush() {
  if (pending_.empty()) return;
  const auto rows = static_cast<hsize_t>(static_cast<int64_t>(pending_.size()) / sample_bytes_);
  const hsize_t start[2] = {static_cast<hsize_t>(rows_written_), 0};
  const hsize_t count[2] = {rows, static_cast<hsize_t>(sample_bytes_)};
  const QuietErrors quiet;
  const H5Id file_space(H5Dget_space(handles_->images.get()), H5Sclose);
  const H5Id mem_space(H5Screate_simple(2, count, nullptr), H5Sclose);
  if (H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr) < 0 ||
      H5Dwrite(handles_->images.get(), H5T_NATIVE_UINT8, mem_space.get(), file_space.get(), H5P_DEFAULT,
               pending_.data()) < 0) {
    throw std::runtime_error(path_ + ": write of rows " + std::to_string(rows_written_) + ".." +
                             std::to_string(rows_written_ + static_cast<int64_t>(rows)) + " failed (" + ErrorText() + ")");
  }
  rows_written_ += static_cast<int64_t>(rows);
  bytes_written_ = rows_written_ * sample_bytes_;
  pending_.clear();
}

void Hdf5Writer::Add(std::span<const std::byte> row) {
  if (static_cast<int64_t>(row.size()) != sample_bytes_ || rows_added_ >= samples_) {
    throw std::logic_error("Hdf5Writer::Add: a row of " + std::to_string(row.size()) + " bytes as row " +
                           std::to_string(rows_added_));
  }
  pending_.insert(pending_.end(), row.begin(), row.end());
  ++rows_added_;
  if (static_cast<int64_t>(pending_.size()) >= chunk_samples_ * sample_bytes_) Flush();
}

void Hdf5Writer::SetLabels(std::vector<int64_t> labels) {
  if (static_cast<int64_t>(labels.size()) != samples_) {
    throw std::logic_error("Hdf5Writer::SetLabels: " + std::to_string(labels.size()) + " labels for " +
                           std::to_string(samples_) + " rows");
  }
  labels_ = std::move(labels);
}

void Hdf5Writer::Finish() {
  if (rows_added_ != samples_) {
    throw std::logic_error("Hdf5Writer::Finish: " + std::to_string(rows_added_) + " of " + std::to_string(samples_) +
                           " rows written");
  }
  Flush();
  std::vector<int64_t> labels = labels_;
  if (labels.empty()) {
    labels.resize(static_cast<size_t>(samples_));
    for (int64_t i = 0; i < samples_; ++i) labels[static_cast<size_t>(i)] = Label(i);
  }
  const QuietErrors quiet;
  if (H5Dwrite(handles_->labels.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels.data()) < 0 ||
      H5Fflush(handles_->file.get(), H5F_SCOPE_GLOBAL) < 0) {
    throw std::runtime_error(path_ + ": writing the labels failed (" + ErrorText() + ")");
  }
  handles_.reset();
  // Synced so that `cache: cold` can evict it later (dirty pages cannot be).
  const UniqueFd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid() || ::fsync(fd.get()) != 0) throw std::runtime_error(path_ + ": fsync failed: " + ErrnoText(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) == 0) bytes_written_ = st.st_size;
  finished_ = true;
}

}  // namespace feedtune::workloads

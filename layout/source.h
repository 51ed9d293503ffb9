// SampleSource: a dataset as `feedtune convert` reads it (docs/layout.md):
// sample i's bytes as stored (no decode), its label where the source has
// one, and a name for it that a user can find (a file, an HDF5 row, a tar
// member). Every format feedtune reads opens here, through the readers of
// workloads/ (format told by workloads::DetectFormat):
//
//   a folder       every regular file under it in path order (FilesDataset,
//                  layout files); labels: --labels folder takes the class of
//                  each file from the folder under PATH that holds it, the
//                  folders numbered in name order (torchvision's ImageFolder)
//   feedtune shards  a folder with index.ftidx (gen-data --layout shards)
//   .npy           row i (NpyDataset)
//   HDF5           row i of --dataset (Hdf5Dataset); labels from --labels
//                  NAME, or /labels when the file has one (auto)
//   LMDB           the value of the i-th key (LmdbDataset)
//   TFRecord       record i, or its --feature (TfRecordDataset)
//   tar shards     sample i's one payload member; its label from its .cls
//                  member (WebDataset's convention), when every sample has
//                  one (--labels cls: every sample must)
//   s3://B/P       one object per sample, in key order (RemoteDataset);
//                  --labels folder: the first folder of the key under P;
//                  or, where its objects are *.tar, tar shards as above,
//                  indexed through ranged GETs (RemoteTarDataset's scan)
//
// Opening reads indexes and headers only. Read() may be called from one
// thread at a time per process; the source is opened read-only and nothing
// in it is ever written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "workloads/options.h"

namespace feedtune::layout {

struct SourceOptions {
  // auto: HDF5 /labels when present, tar .cls members when every sample has
  // one, none otherwise; none; folder (ImageFolder: a folder of files); cls
  // (tar shards' .cls members, which every sample must have); /NAME: an HDF5
  // dataset. A value that does not fit the source is refused (OpenSource).
  std::string labels = "auto";
  std::string dataset = "/images";  // HDF5: the samples
  std::string feature;              // TFRecord: a bytes feature of each Example; empty: the whole record
};

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual int64_t size() const = 0;
  // Sample `index`'s bytes into *bytes (resized to fit). Throws
  // std::runtime_error naming the sample (Name) and what went wrong.
  virtual void Read(int64_t index, std::vector<std::byte>* bytes) const = 0;
  // A hint: these samples are read next, in this order. A remote source
  // fetches them together (requests in flight) for the Reads that follow;
  // a local one ignores it.
  virtual void WillRead(std::span<const int64_t> /*indices*/) const {}
  // Where sample `index` lives, for messages: "src/cat/001.jpg",
  // "data.h5 /images row 17", "data-00001.tar member 000000017.jpg".
  virtual std::string Name(int64_t index) const = 0;
  // Bytes of all samples together (from indexes and headers: an estimate
  // for the free-space check and the progress line, exact for most formats).
  virtual int64_t total_bytes() const = 0;
  // Samples all of one size (npy and HDF5 require it); 0 when they differ.
  virtual int64_t fixed_sample_bytes() const = 0;

  bool has_labels() const { return !labels_.empty(); }
  int64_t label(int64_t index) const { return labels_.empty() ? -1 : labels_[static_cast<size_t>(index)]; }
  // What the samples are, for a reader of the converted data: "jpg" when
  // each is a JPEG (by its name: a .jpg/.jpeg/.jpe file or tar member), else
  // the extension they share ("png", "bin"), "bin" when none.
  const std::string& payload_extension() const { return extension_; }
  // "folder", "imagefolder", "shards", "npy", "hdf5", "lmdb", "tfrecord", "tar".
  const std::string& kind() const { return kind_; }
  // The path it was opened from: DST must not be it or inside it.
  const std::string& root() const { return root_; }
  // A folder source (local, or an s3:// prefix of objects): sample
  // `index`'s name relative to the source, its file under the folder or its
  // key under the prefix ("cat/001.jpg"), which `feedtune layout`'s copy of
  // the source as it is keeps; empty for the other sources.
  virtual std::string copy_name(int64_t /*index*/) const { return {}; }
  // Tar shards (local or on a store): how many shards the samples are in;
  // 0 for the other sources. A subset gives its source's count.
  virtual int64_t shard_count() const { return 0; }

 protected:
  std::vector<int64_t> labels_;
  std::string extension_ = "bin";
  std::string kind_;
  std::string root_;
};

// Samples `indices` of `source` (which must outlive it), renumbered 0..K-1:
// what `feedtune layout` writes each candidate from. Labels, names, the
// payload's extension and the kind come along.
std::unique_ptr<SampleSource> SubsetOf(const SampleSource& source, std::vector<int64_t> indices);

// The JPEG samples of `source` (which must outlive it) decoded once into raw
// pixels, each sample a binary PPM ("P6\nW H\n255\n" + W x H x 3 RGB
// bytes; payload "ppm"), which the readers' decode: jpeg crops and resizes
// without a decode (workloads/jpeg_image.h): `convert --pixels`. Its Read
// decodes; a sample that does not decode throws naming it. Throws
// std::invalid_argument when the samples are not JPEGs.
std::unique_ptr<SampleSource> DecodedPixelsOf(const SampleSource& source);

// K indices spread evenly over [0, n): sample floor(k n / K) for k < K, so a
// subset covers the whole dataset (all its shards, files and classes).
std::vector<int64_t> SpreadIndices(int64_t n, int64_t k);

// Opens the dataset at `path` (its format told by its content). Throws
// workloads::DatasetNotFound (nothing there, not a dataset: the message says
// what is read) or workloads::DatasetCorrupt (a truncated HDF5 file or tar
// shard, a damaged index), each naming the file; std::invalid_argument for
// options that do not fit the source (--labels folder on an HDF5 file).
std::unique_ptr<SampleSource> OpenSource(const std::string& path, const SourceOptions& options);

// What the readers charge per sample here: nothing. Sources and converted
// copies are read for their bytes as stored: no CPU cost, jitter or torch costs.
workloads::SyntheticOptions NoSourceCost();

}  // namespace feedtune::layout

// The candidate layouts `feedtune layout` measures (docs/layout.md#feedtune-layout-path):
// which ones fit a source, and each written from a sample of it into the
// scratch folder, timed, so its write time can be extrapolated to the whole
// dataset.
//
//   as-is      the source's own layout: a folder's sampled files copied as
//              they are; an HDF5 file with the source's chunk rows and gzip
//              level; npy, LMDB; tar shards of the source's shard size;
//              TFRecord and feedtune shards are measured in place (convert
//              writes neither)
//   tar        shards of a sixteenth of the sample, read map-style (random
//              access) and streamed (each worker its shards front to back);
//              shards of a sixty-fourth, streamed
//   pixels     JPEG samples decoded once into raw pixels (convert --pixels),
//              in tar shards of a sixteenth, streamed (decode_images only)
//   lmdb
//   hdf5       a chunk of one sample and of 32, each uncompressed and gzip:4
//              (samples of one size only, and not decode_images)
//   npy        (samples of one size only, and not decode_images)
//
// decode_images: the samples are JPEGs the job decodes, crops and resizes:
// every candidate is read with decode: jpeg (random crop, 224 x 224), so
// the decode CPU is in each figure, and raw pixels are a candidate.
//
// Each candidate's written files are read by the workload kinds of
// workloads/ (kind tar, hdf5, lmdb, npy, files, tfrecord), so it is measured
// by the same trials a sweep runs.
//
// On an object store (PlanStoreCandidates: the scratch an s3:// prefix) the
// candidates are the layouts a store is read in (workloads/remote_dataset.h,
// remote_tar_dataset.h): the source as it is, an object per sample (or a tar
// source's shards); tar shards of a sixteenth of the sample read map-style
// (one ranged GET per sample); streamed shards of three sizes, a
// sixteenth, a sixty-fourth and a 256th of the sample; and with
// decode_images, raw pixels streamed in shards of a sixteenth (each
// candidate read with decode: jpeg, as locally). There the object's
// size is what a round trip is paid for: a stream reads each shard in ranged
// GETs of the stream's window (8 MiB), at least one a shard, so shards under
// the window cost a GET each and more of them a GET per fewer bytes; at the
// default store sample (256 MB) the three are 16, 4 and 1 MB, either side of
// the window. Larger shards are not measured, for the reason above: a sample
// of a few would starve the streamed readers, and past the window they save
// no GET. LMDB, HDF5 and npy are read from local paths only, so are not
// candidates there.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "layout/convert.h"
#include "layout/source.h"

namespace feedtune::layout {

struct Candidate {
  std::string name;       // "tar, 16 shards, streamed"
  std::string data;       // the folder it is written to (shared by candidates that read one copy two ways)
  bool as_is = false;     // the source's own layout
  bool in_place = false;  // as-is, measured on the source itself (nothing written)
  bool copy_files = false;  // as-is for a folder: the sampled files copied
  ConvertOptions convert;   // else: written by Convert
  // The workload keys of a sweep config that read it (YAML, two-space
  // indented under `workload:`), but the cost keys.
  std::string workload_yaml;
  bool streamed = false;  // access: stream: each worker reads its shards front to back
  bool on_store = false;  // written to an s3:// prefix (data), read from there
};

// The candidates for `source` (opened from `source_path`), written under
// `scratch`.
std::vector<Candidate> PlanCandidates(const SampleSource& source, const std::string& source_path,
                                      const std::string& scratch, bool decode_images);

// The candidates on an object store: written under `scratch`, an s3://
// prefix ending in '/'. `jpegs`: the samples are JPEGs; `decode_images`: the
// job decodes them, so every candidate is read with decode: jpeg and raw
// pixels are one. The layouts not measured there (LMDB, HDF5, npy: a store
// is not read in them; raw pixels of JPEGs the job does not decode) are
// left out, each with one line on why in *left_out. Throws
// std::invalid_argument for a source whose own layout a store is not read
// in (the source as it is would not be a candidate): a folder of files, an
// ImageFolder tree or tar shards are.
std::vector<Candidate> PlanStoreCandidates(const SampleSource& source, const std::string& source_path,
                                           const std::string& scratch, bool jpegs, bool decode_images,
                                           std::vector<std::string>* left_out);

// The GETs one epoch of the whole dataset (`source`) costs in `candidate`
// read from a store, its files taking `bytes` in all (extrapolated from the
// sample): one per sample for an object per sample and for tar shards read
// map-style (one ranged GET each); for a stream, each shard's bytes in
// ranged GETs of the stream's window (RemoteTarDataset::kStreamWindow), at
// least one a shard, with the shards the convert of the whole dataset at the
// candidate's shard size writes (ShardCount; of the decoded pixels, from 64
// images' headers as convert counts them, for raw pixels). Not counted: the listing at
// open (one request per 1000 keys) and a tar shard's index scan at open
// (about shard bytes / 1 MiB ranged GETs), each paid once per open, not per epoch.
int64_t RequestsPerEpoch(const Candidate& candidate, const SampleSource& source, int64_t bytes);

// The options of `feedtune convert` that write `candidate` for the whole
// dataset ("--layout tar --shard-bytes 18400000"): tar shards of the same
// size as the sample's, so the whole dataset has more of them, not larger.
std::string ConvertArguments(const Candidate& candidate);

struct WrittenCandidate {
  double write_seconds = 0;    // the write alone (Convert's write phase, or the copy)
  int64_t bytes_on_disk = 0;   // what the sample takes in this layout
  double read_amplification = 1;  // bytes read (or inflated) per byte of sample, for a shuffled read
};

// Writes `candidate` from `sample` (a subset of the source) unless its
// folder holds it already (two candidates share a copy). Throws as Convert does.
WrittenCandidate WriteCandidate(const Candidate& candidate, const SampleSource& sample, const std::atomic<bool>& stop);

}  // namespace feedtune::layout

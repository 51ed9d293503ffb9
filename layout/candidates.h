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
};

// The candidates for `source` (opened from `source_path`), written under
// `scratch`.
std::vector<Candidate> PlanCandidates(const SampleSource& source, const std::string& source_path,
                                      const std::string& scratch, bool decode_images);

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

// JpegSamples: `decode: jpeg` for every native dataset whose stored sample is
// a JPEG's bytes: a file of layout files (workloads/files_dataset.h), a
// TFRecord record or its feature (workloads/tfrecord_dataset.h), a tar
// sample's .jpg member (workloads/tar_dataset.h). The dataset reads the
// compressed bytes its own way and hands them to Decode, which decodes, crops
// and resizes them (workloads/jpeg_image.h: DecodeCropResize) into the
// resize x resize x 3 RGB bytes of the sample.
//
// The crop is drawn from (workload seed, epoch, index), so it differs every
// epoch as torchvision's does: SetEpoch (the loader's, in the consumer
// process) stores the epoch in one MAP_SHARED page mapped at construction,
// before any worker forks, which every worker reads.
//
// Immutable after construction but for the shared epoch; Decode is safe from
// any thread or forked process.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "workloads/options.h"

namespace feedtune::workloads {

class JpegSamples {
 public:
  // Uses decode's crop and resize of `options`. Throws DatasetNotFound when
  // resize is outside [1, 4096], std::system_error when the shared page
  // cannot be mapped.
  JpegSamples(const FilesOptions& options, uint64_t seed);
  ~JpegSamples();
  JpegSamples(const JpegSamples&) = delete;
  JpegSamples& operator=(const JpegSamples&) = delete;

  // Every decoded sample's bytes: resize x resize x 3.
  int64_t sample_bytes() const { return sample_bytes_; }
  void SetEpoch(int64_t epoch) const;

  // Decodes the JPEG in `jpeg` as sample `index` into `out` (at least
  // sample_bytes() long) and returns sample_bytes(). Throws JpegError with
  // libjpeg-turbo's reason ("not a JPEG: the data is empty" for no bytes);
  // the caller names where the bytes came from.
  int64_t Decode(std::span<const std::byte> jpeg, int64_t index, std::span<std::byte> out) const;

  // ", decoded as JPEG (libjpeg-turbo), crop random, resized to 224x224 RGB (150528 bytes per sample)".
  std::string Describe() const;

 private:
  const CropMode crop_;
  const int resize_;
  const uint64_t seed_;
  const int64_t sample_bytes_;
  std::atomic<int64_t>* epoch_ = nullptr;  // in a MAP_SHARED page
};

}  // namespace feedtune::workloads

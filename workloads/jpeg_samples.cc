#include "workloads/jpeg_samples.h"

#include <sys/mman.h>

#include <cerrno>
#include <new>
#include <system_error>

#include "workloads/jpeg_image.h"
#include "workloads/shard_format.h"

namespace feedtune::workloads {
namespace {

int CheckedResize(int64_t resize) {
  if (resize < 1 || resize > 4096) {
    throw DatasetNotFound("workload.resize: expected an integer in [1, 4096], got " + std::to_string(resize));
  }
  return static_cast<int>(resize);
}

}  // namespace

JpegSamples::JpegSamples(const FilesOptions& options, uint64_t seed)
    : crop_(options.crop),
      resize_(CheckedResize(options.resize)),
      seed_(seed),
      sample_bytes_(int64_t{resize_} * resize_ * 3) {
  static_assert(std::atomic<int64_t>::is_always_lock_free, "the shared epoch must be lock-free across processes");
  void* page = ::mmap(nullptr, sizeof(std::atomic<int64_t>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mapping the shared epoch page");
  epoch_ = new (page) std::atomic<int64_t>(0);
}

JpegSamples::~JpegSamples() { ::munmap(epoch_, sizeof(std::atomic<int64_t>)); }

void JpegSamples::SetEpoch(int64_t epoch) const {
  // Release: a worker that gets a task of this epoch (through a socket or a
  // queue, dispatched after this store) reads this epoch or later.
  epoch_->store(epoch, std::memory_order_release);
}

int64_t JpegSamples::Decode(std::span<const std::byte> jpeg, int64_t index, std::span<std::byte> out) const {
  if (jpeg.empty()) throw JpegError("not a JPEG: the data is empty");
  JpegDecodeOptions decode;
  decode.crop = crop_;
  decode.resize = resize_;
  decode.seed = seed_;
  decode.epoch = epoch_->load(std::memory_order_acquire);
  DecodeCropResize(jpeg, index, decode, out);
  return sample_bytes_;
}

std::string JpegSamples::Describe() const {
  const std::string side = std::to_string(resize_);
  return std::string(", decoded as JPEG (libjpeg-turbo), crop ") + CropModeName(crop_) + ", resized to " + side + "x" +
         side + " RGB (" + std::to_string(sample_bytes_) + " bytes per sample)";
}

}  // namespace feedtune::workloads

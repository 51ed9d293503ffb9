#include "loader/slot_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>

namespace feedtune::loader {
namespace {

constexpr size_t kCacheLine = 64;

}  // namespace

SlotArena::SlotArena(int num_slots, size_t slot_bytes)
    : num_slots_(num_slots),
      slot_bytes_((slot_bytes + kCacheLine - 1) / kCacheLine * kCacheLine),
      mapped_bytes_(static_cast<size_t>(num_slots) * slot_bytes_) {
  if (num_slots < 1 || slot_bytes == 0) throw std::invalid_argument("SlotArena: empty arena");
  const int fd = memfd_create("feedtune-slots", MFD_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "memfd_create for batch slots");
  if (ftruncate(fd, static_cast<off_t>(mapped_bytes_)) != 0) {
    const int err = errno;
    close(fd);
    throw std::system_error(err, std::generic_category(),
                            "sizing " + std::to_string(mapped_bytes_) + " bytes of shared memory for " +
                                std::to_string(num_slots) + " batch slots");
  }
  void* p = mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  const int err = errno;
  close(fd);  // the mapping keeps the memory alive
  if (p == MAP_FAILED) {
    throw std::system_error(err, std::generic_category(),
                            "mapping " + std::to_string(mapped_bytes_) + " bytes of batch slots");
  }
  base_ = static_cast<std::byte*>(p);
}

SlotArena::~SlotArena() {
  if (base_ != nullptr) munmap(base_, mapped_bytes_);
}

std::span<std::byte> SlotArena::slot(int index) const {
  return {base_ + static_cast<size_t>(index) * slot_bytes_, slot_bytes_};
}

}  // namespace feedtune::loader

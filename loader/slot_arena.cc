#include "loader/slot_arena.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <string>
#include <system_error>

namespace feedtune::loader {
namespace {

constexpr size_t kCacheLine = 64;

std::byte* MapShared(int fd, size_t bytes, int extra_flags, const std::string& what) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | extra_flags, fd, 0);
  if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), what);
  return static_cast<std::byte*>(p);
}

}  // namespace

SlotArena::SlotArena(int num_slots, size_t slot_bytes, size_t trace_bytes)
    : num_slots_(num_slots),
      slot_bytes_((slot_bytes + kCacheLine - 1) / kCacheLine * kCacheLine),
      mapped_bytes_(static_cast<size_t>(num_slots) * slot_bytes_ + trace_bytes) {
  if (num_slots < 1 || slot_bytes == 0) throw std::invalid_argument("SlotArena: empty arena");
  fd_ = memfd_create("feedtune-slots", MFD_CLOEXEC);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "memfd_create for batch slots");
  try {
    if (ftruncate(fd_, static_cast<off_t>(mapped_bytes_)) != 0) {
      throw std::system_error(errno, std::generic_category(),
                              "sizing " + std::to_string(mapped_bytes_) + " bytes of shared memory for " +
                                  std::to_string(num_slots) + " batch slots");
    }
    base_ = MapShared(fd_, mapped_bytes_, MAP_POPULATE,
                      "mapping " + std::to_string(mapped_bytes_) + " bytes of batch slots");
  } catch (...) {
    close(fd_);
    throw;
  }
}

SlotArena::SlotArena(int fd, int num_slots, size_t slot_bytes)
    : num_slots_(num_slots), slot_bytes_(slot_bytes), mapped_bytes_(static_cast<size_t>(num_slots) * slot_bytes) {
  try {
    // The memfd's size tells whether a trace region follows the slots.
    struct stat st {};
    if (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) > mapped_bytes_) {
      mapped_bytes_ = static_cast<size_t>(st.st_size);
    }
    base_ = MapShared(fd, mapped_bytes_, 0, "mapping the batch slots in a worker");
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);  // the mapping keeps the memory alive
}

SlotArena::~SlotArena() {
  if (base_ != nullptr) munmap(base_, mapped_bytes_);
  if (fd_ >= 0) close(fd_);
}

std::span<std::byte> SlotArena::slot(int index) const {
  return {base_ + static_cast<size_t>(index) * slot_bytes_, slot_bytes_};
}

std::span<std::byte> SlotArena::trace_region() const {
  const size_t slots_end = static_cast<size_t>(num_slots_) * slot_bytes_;
  return {base_ + slots_end, mapped_bytes_ - slots_end};
}

}  // namespace feedtune::loader

#include "loader/device/host_buffer.h"

#include <sys/mman.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

namespace feedtune::device {
namespace {

constexpr size_t kPage = 4096;

void FreeAligned(std::byte* data, size_t /*size*/) noexcept { std::free(data); }
void FreeMapping(std::byte* data, size_t size) noexcept { munmap(data, size); }

}  // namespace

HostBuffer& HostBuffer::operator=(HostBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    pinned_ = std::exchange(other.pinned_, false);
    free_ = std::exchange(other.free_, nullptr);
  }
  return *this;
}

void HostBuffer::Reset() noexcept {
  if (data_ != nullptr && free_ != nullptr) free_(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

HostBuffer AllocPageable(size_t bytes) {
  const size_t rounded = (bytes + kPage - 1) / kPage * kPage;
  void* p = std::aligned_alloc(kPage, rounded == 0 ? kPage : rounded);
  if (p == nullptr) throw std::bad_alloc();
  return HostBuffer(static_cast<std::byte*>(p), bytes, false, &FreeAligned);
}

HostBuffer AllocLockedHostSim(size_t bytes, bool* locked, std::string* why_not) {
  const size_t rounded = (bytes + kPage - 1) / kPage * kPage;
  void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  *locked = mlock(p, rounded) == 0;
  if (!*locked && why_not != nullptr) {
    const int err = errno;
    rlimit limit{};
    getrlimit(RLIMIT_MEMLOCK, &limit);
    *why_not = "mlock of " + std::to_string(rounded >> 20) + " MiB failed (" + std::strerror(err) +
               "; RLIMIT_MEMLOCK is " +
               (limit.rlim_cur == RLIM_INFINITY ? std::string("unlimited")
                                                : std::to_string(limit.rlim_cur >> 10) + " KiB") +
               "); raise it with `ulimit -l` to measure real pinning";
  }
  return HostBuffer(static_cast<std::byte*>(p), rounded, *locked, &FreeMapping);
}

}  // namespace feedtune::device

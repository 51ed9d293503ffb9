// HostBuffer: RAII owner of one host memory block, pageable or page-locked.
// The device backend allocates them (cudaHostAlloc on CUDA, an mlock'ed mapping
// on host-sim); the block is freed by the function it was allocated with.
// Move-only; not thread-safe; the destructor never throws.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

namespace feedtune::device {

class HostBuffer {
 public:
  using FreeFn = void (*)(std::byte* data, size_t size) noexcept;

  HostBuffer() = default;
  HostBuffer(std::byte* data, size_t size, bool pinned, FreeFn free_fn)
      : data_(data), size_(size), pinned_(pinned), free_(free_fn) {}
  HostBuffer(HostBuffer&& other) noexcept { *this = std::move(other); }
  HostBuffer& operator=(HostBuffer&& other) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer() { Reset(); }

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  bool pinned() const { return pinned_; }

 private:
  void Reset() noexcept;

  std::byte* data_ = nullptr;
  size_t size_ = 0;
  bool pinned_ = false;
  FreeFn free_ = nullptr;
};

// Pageable memory (aligned to a page, like torch's CPU allocator for big tensors).
HostBuffer AllocPageable(size_t bytes);

// Page-locked memory without a GPU: an anonymous mapping locked with mlock. When
// RLIMIT_MEMLOCK is too low the block stays pageable: `locked` says which, and
// `*why_not` (when given) says why.
HostBuffer AllocLockedHostSim(size_t bytes, bool* locked, std::string* why_not);

}  // namespace feedtune::device

// SlotArena: a fixed set of equal-sized batch slots in one shared-memory mapping.
//
// Batches travel from workers to the consumer in these slots, so no batch is
// allocated or copied per step. The mapping is an anonymous memfd mapped
// MAP_SHARED: worker processes map the same memfd (the fork server passes it
// to them), and the kernel frees it when the last mapping and descriptor go,
// so a crash can never leak a named /dev/shm segment.
// The arena is constant after construction; who may write a slot is decided by
// the DataLoader (a slot belongs to one worker or to the consumer at a time).
// With tracing on, the same memfd ends in a trace region (loader/trace.h) past
// the slots, so a worker's spans reach the consumer without another descriptor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace feedtune::loader {

class SlotArena {
 public:
  // Throws std::system_error (with the size asked for) when memory or /dev/shm is short.
  // `trace_bytes` > 0 adds a trace region of that size after the slots.
  SlotArena(int num_slots, size_t slot_bytes, size_t trace_bytes = 0);
  // Maps the arena whose memfd is `fd` (a worker's view of the consumer's
  // arena, with the consumer's num_slots() and slot_bytes(); the trace region,
  // if any, is what the memfd holds past the slots); takes `fd`.
  SlotArena(int fd, int num_slots, size_t slot_bytes);
  SlotArena(const SlotArena&) = delete;
  SlotArena& operator=(const SlotArena&) = delete;
  ~SlotArena();

  int num_slots() const { return num_slots_; }
  size_t slot_bytes() const { return slot_bytes_; }
  std::span<std::byte> slot(int index) const;
  // The bytes past the slots; empty when tracing is off.
  std::span<std::byte> trace_region() const;
  // The memfd behind the mapping (close-on-exec), to hand to worker processes.
  int fd() const { return fd_; }

 private:
  int num_slots_;
  size_t slot_bytes_;  // rounded up to a cache line, so slots never share one
  size_t mapped_bytes_;
  std::byte* base_ = nullptr;
  int fd_ = -1;
};

}  // namespace feedtune::loader

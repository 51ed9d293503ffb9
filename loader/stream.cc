#include "loader/stream.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "loader/sampler.h"

namespace feedtune::loader {

std::vector<int64_t> ShardsOf(int64_t num_shards, const StreamShare& share) {
  if (share.world_size < 1 || share.rank < 0 || share.rank >= share.world_size) {
    throw std::invalid_argument("stream share: rank " + std::to_string(share.rank) + " of " +
                                std::to_string(share.world_size));
  }
  if (share.num_workers < 1 || share.worker < 0 || share.worker >= share.num_workers) {
    throw std::invalid_argument("stream share: worker " + std::to_string(share.worker) + " of " +
                                std::to_string(share.num_workers));
  }
  const EpochPermutation order(num_shards, share.shuffle, share.seed, share.epoch);
  // Position p of the epoch's order goes to rank p % R, and is the
  // (p / R)-th of that rank's list; the worker takes every W-th of the list.
  std::vector<int64_t> shards;
  const int64_t ranks = share.world_size, workers = share.num_workers;
  for (int64_t k = share.worker; share.rank + k * ranks < num_shards; k += workers) {
    shards.push_back(order.at(share.rank + k * ranks));
  }
  return shards;
}

int64_t StreamBatches(const Dataset& dataset, const std::vector<int64_t>& shards, int batch_size, bool drop_last) {
  int64_t samples = 0;
  for (const int64_t shard : shards) samples += dataset.shard_samples(shard);
  return drop_last ? samples / batch_size : (samples + batch_size - 1) / batch_size;
}

SampleStream::SampleStream(const Dataset& dataset, const StreamShare& share)
    : dataset_(dataset),
      shards_(ShardsOf(dataset.num_shards(), share)),
      buffer_size_(share.shuffle && share.shuffle_buffer > 1 ? static_cast<size_t>(share.shuffle_buffer) : 0),
      // Each reader its own draws, reproducible in (seed, epoch, rank, worker).
      rng_(Mix64(share.seed) ^ Mix64(static_cast<uint64_t>(share.epoch) * 0x9E3779B97F4A7C15ULL +
                                      static_cast<uint64_t>(share.rank) * 0x100000001B3ULL +
                                      static_cast<uint64_t>(share.worker) + 1)) {}

bool SampleStream::ReadFromShards(Sample* sample) {
  while (true) {
    if (!reader_) {
      if (next_shard_ >= shards_.size()) return false;
      reader_ = dataset_.OpenShard(shards_[next_shard_++]);
    }
    if (reader_->Next(&sample->bytes, &sample->index)) return true;
    reader_.reset();
  }
}

void SampleStream::Emit(Sample& sample, std::span<std::byte> out, int64_t* index, int64_t* bytes) const {
  if (sample.bytes.size() > out.size()) {
    throw std::runtime_error("sample " + std::to_string(sample.index) + " is " + std::to_string(sample.bytes.size()) +
                             " bytes, more than the dataset's largest (" + std::to_string(out.size()) + ")");
  }
  std::memcpy(out.data(), sample.bytes.data(), sample.bytes.size());
  *index = sample.index;
  *bytes = static_cast<int64_t>(sample.bytes.size());
}

bool SampleStream::Next(std::span<std::byte> out, int64_t* index, int64_t* bytes) {
  if (buffer_size_ == 0) {
    if (!ReadFromShards(&incoming_)) return false;
    Emit(incoming_, out, index, bytes);
    return true;
  }
  while (buffer_.size() < buffer_size_) {
    if (!ReadFromShards(&incoming_)) break;
    buffer_.push_back(std::move(incoming_));
    incoming_ = Sample{};
  }
  if (buffer_.empty()) return false;
  const size_t pick = static_cast<size_t>(SplitMix64(rng_) % buffer_.size());
  Emit(buffer_[pick], out, index, bytes);
  // The emitted sample's place goes to the next one read, or, once the shards
  // are read, to the last of the buffer (the buffer drains).
  if (ReadFromShards(&incoming_)) {
    std::swap(buffer_[pick], incoming_);
  } else {
    std::swap(buffer_[pick], buffer_.back());
    buffer_.pop_back();
  }
  return true;
}

WorkerStream::Fill WorkerStream::FillBatch(const StreamShare& share, std::span<std::byte> slot, int64_t stride,
                                           int64_t count) {
  if (!stream_ || pass_ != share.pass) {
    stream_ = std::make_unique<SampleStream>(dataset_, share);
    pass_ = share.pass;
  }
  Fill fill;
  const size_t step = static_cast<size_t>(stride);
  std::byte* const indices = slot.data() + static_cast<size_t>(count) * step;
  for (int64_t i = 0; i < count; ++i) {
    int64_t index = 0, bytes = 0;
    if (!stream_->Next(slot.subspan(static_cast<size_t>(i) * step, step), &index, &bytes)) break;
    std::memcpy(indices + static_cast<size_t>(i) * sizeof index, &index, sizeof index);
    fill.bytes += bytes;
    ++fill.samples;
  }
  if (share.drop_last && fill.samples < count) fill = Fill{};
  return fill;
}

int64_t StreamSlotBytes(int64_t batch_size, int64_t stride) {
  return batch_size * stride + batch_size * static_cast<int64_t>(sizeof(int64_t));
}

void ReadStreamIndices(std::span<const std::byte> slot, int64_t stride, int64_t batch_size, std::span<int64_t> out) {
  std::memcpy(out.data(), slot.data() + batch_size * stride, out.size_bytes());
}

}  // namespace feedtune::loader

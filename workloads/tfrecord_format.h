// The TFRecord format (workload.kind: tfrecord): framing, the index beside
// the data, and tf.train.Example features.
//
// A file is records back to back, each framed as TensorFlow writes it:
//   u64 length, u32 masked_crc32c(length bytes), data[length], u32 masked_crc32c(data)
// little-endian, where masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8.
// Both checksums are checked on every read.
//
// The index is DALI's tfrecord2idx format: one line "OFFSET SIZE" per record,
// SIZE the whole framed record (16 + length). It lives at FILE.idx beside the
// data, or, where that folder is read-only, under the cache folder
// ($XDG_CACHE_HOME or ~/.cache, then feedtune/tfrecord-idx/). An existing
// index is used when it matches the file: its records tile the file exactly
// and the first and last record's length fields agree with it.
//
// Pure functions and small values; the parsers take bytes, not files, so the
// fuzzers (tests/fuzz) drive the same code the readers run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace feedtune::workloads {

inline constexpr size_t kTfRecordFraming = 16;  // length, its CRC, the data's CRC

uint32_t MaskedCrc32c(std::span<const std::byte> data);

struct TfRecordEntry {
  uint64_t offset = 0;  // of the record's length field
  uint64_t size = 0;    // framed: kTfRecordFraming + the data's length
  uint64_t data_bytes() const { return size - kTfRecordFraming; }
};

// The records of `bytes` (a whole file, or its start when `complete` is
// false: then a cut-short last record ends the scan instead of failing).
// Throws DatasetCorrupt naming `name` and the byte offset of the first
// record whose framing or length CRC is bad. Data CRCs are not checked here
// (a scan for an index reads only headers); CheckTfRecord checks one record.
std::vector<TfRecordEntry> ScanTfRecords(std::span<const std::byte> bytes, const std::string& name,
                                         bool complete = true);

// The data of a whole framed record (both CRCs checked); throws
// DatasetCorrupt naming `name`, the record number and its offset.
std::span<const std::byte> CheckTfRecord(std::span<const std::byte> framed, const std::string& name, int64_t record,
                                         uint64_t offset);

// Appends `data` to `out`, framed.
void AppendTfRecord(std::span<const std::byte> data, std::vector<std::byte>* out);

// DALI's index text for `entries`, and its parse (throws DatasetCorrupt naming
// `name` and the line for a malformed one).
std::string TfRecordIndexText(const std::vector<TfRecordEntry>& entries);
std::vector<TfRecordEntry> ParseTfRecordIndex(const std::string& text, const std::string& name);

// A serialized tf.train.Example with one bytes feature and one int64 feature
// (what gen-data writes: the payload under "data", the sample's number under "index").
std::string ExampleRecord(const std::string& bytes_feature, std::span<const std::byte> bytes,
                          const std::string& int64_feature, int64_t value);

// The first value of bytes feature `feature` of the Example in `record`.
// Throws DatasetCorrupt naming `where` when the record is not an Example,
// has no such feature (the features it has are listed), or the feature is
// not a bytes list.
std::string ExampleBytesFeature(std::span<const std::byte> record, const std::string& feature,
                                const std::string& where);

}  // namespace feedtune::workloads

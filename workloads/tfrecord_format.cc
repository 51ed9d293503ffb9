#include "workloads/tfrecord_format.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "workloads/crc32c.h"
#include "workloads/proto/tf_example.pb.h"
#include "workloads/shard_format.h"

namespace feedtune::workloads {
namespace {

template <typename T>
T LoadLe(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // the formats are little-endian, as is every host we build for
  return v;
}

std::string At(const std::string& name, uint64_t offset) { return name + ": record at byte " + std::to_string(offset); }

}  // namespace

uint32_t MaskedCrc32c(std::span<const std::byte> data) {
  const uint32_t crc = Crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8U;
}

std::vector<TfRecordEntry> ScanTfRecords(std::span<const std::byte> bytes, const std::string& name, bool complete) {
  std::vector<TfRecordEntry> entries;
  uint64_t pos = 0;
  while (pos < bytes.size()) {
    const uint64_t left = bytes.size() - pos;
    if (left < 12) {
      if (!complete) break;
      throw DatasetCorrupt(At(name, pos) + ": truncated (" + std::to_string(left) +
                           " bytes left, a record header is 12)");
    }
    const auto header = bytes.subspan(pos, 12);
    const uint64_t length = LoadLe<uint64_t>(header.data());
    if (LoadLe<uint32_t>(header.data() + 8) != MaskedCrc32c(header.first(8))) {
      throw DatasetCorrupt(At(name, pos) + ": bad length CRC (not a TFRecord file, or damaged)");
    }
    if (left < kTfRecordFraming || length > left - kTfRecordFraming) {
      if (!complete) break;
      throw DatasetCorrupt(At(name, pos) + ": truncated (the record says " + std::to_string(length) +
                           " bytes of data, " + std::to_string(left < kTfRecordFraming ? 0 : left - kTfRecordFraming) +
                           " are left)");
    }
    entries.push_back({pos, length + kTfRecordFraming});
    pos += length + kTfRecordFraming;
  }
  return entries;
}

std::span<const std::byte> CheckTfRecord(std::span<const std::byte> framed, const std::string& name, int64_t record,
                                         uint64_t offset) {
  const std::string where = name + ": record " + std::to_string(record) + " at byte " + std::to_string(offset);
  if (framed.size() < kTfRecordFraming) throw DatasetCorrupt(where + ": truncated");
  const uint64_t length = LoadLe<uint64_t>(framed.data());
  if (LoadLe<uint32_t>(framed.data() + 8) != MaskedCrc32c(framed.first(8))) {
    throw DatasetCorrupt(where + ": bad length CRC");
  }
  if (length != framed.size() - kTfRecordFraming) {
    throw DatasetCorrupt(where + ": its length field says " + std::to_string(length) + " bytes, the index " +
                         std::to_string(framed.size() - kTfRecordFraming) +
                         " (a stale index: delete the .idx file and feedtune rebuilds it)");
  }
  const auto data = framed.subspan(12, length);
  if (LoadLe<uint32_t>(framed.data() + 12 + length) != MaskedCrc32c(data)) {
    throw DatasetCorrupt(where + ": bad data CRC (the record is damaged)");
  }
  return data;
}

void AppendTfRecord(std::span<const std::byte> data, std::vector<std::byte>* out) {
  const uint64_t length = data.size();
  const size_t start = out->size();
  out->resize(start + kTfRecordFraming + data.size());
  std::byte* p = out->data() + start;
  std::memcpy(p, &length, 8);
  const uint32_t length_crc = MaskedCrc32c(std::span<const std::byte>(p, 8));
  std::memcpy(p + 8, &length_crc, 4);
  if (!data.empty()) std::memcpy(p + 12, data.data(), data.size());
  const uint32_t data_crc = MaskedCrc32c(data);
  std::memcpy(p + 12 + data.size(), &data_crc, 4);
}

std::string TfRecordIndexText(const std::vector<TfRecordEntry>& entries) {
  std::string text;
  for (const auto& e : entries) text += std::to_string(e.offset) + " " + std::to_string(e.size) + "\n";
  return text;
}

std::vector<TfRecordEntry> ParseTfRecordIndex(const std::string& text, const std::string& name) {
  std::vector<TfRecordEntry> entries;
  std::istringstream in(text);
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    std::istringstream fields(line);
    TfRecordEntry e;
    std::string rest;
    if (!(fields >> e.offset >> e.size) || (fields >> rest) || e.size < kTfRecordFraming) {
      throw DatasetCorrupt(name + ": line " + std::to_string(number) + ": expected 'OFFSET SIZE' (DALI's " +
                           "tfrecord2idx format), got '" + line.substr(0, 80) + "'");
    }
    entries.push_back(e);
  }
  return entries;
}

std::string ExampleRecord(const std::string& bytes_feature, std::span<const std::byte> bytes,
                          const std::string& int64_feature, int64_t value) {
  tensorflow::Example example;
  auto& features = *example.mutable_features()->mutable_feature();
  features[bytes_feature].mutable_bytes_list()->add_value(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  features[int64_feature].mutable_int64_list()->add_value(value);
  // Deterministic: map entries in key order, so gen-data writes the same bytes every run.
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    example.SerializeToCodedStream(&coded);
  }
  return out;
}

std::string ExampleBytesFeature(std::span<const std::byte> record, const std::string& feature,
                                const std::string& where) {
  tensorflow::Example example;
  if (record.size() > static_cast<size_t>(INT32_MAX) ||
      !example.ParseFromArray(record.data(), static_cast<int>(record.size()))) {
    throw DatasetCorrupt(where + ": not a tf.train.Example, so it has no feature '" + feature +
                         "' (drop workload.feature to read whole records)");
  }
  const auto& features = example.features().feature();
  const auto found = features.find(feature);
  if (found == features.end()) {
    std::vector<std::string> names;
    for (const auto& [name, value] : features) names.push_back(name);
    std::sort(names.begin(), names.end());
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw DatasetCorrupt(where + ": the Example has no feature '" + feature + "' (it has: " +
                         (list.empty() ? std::string("none") : list) + ")");
  }
  if (found->second.kind_case() != tensorflow::Feature::kBytesList || found->second.bytes_list().value_size() < 1) {
    throw DatasetCorrupt(where + ": feature '" + feature + "' is not a non-empty bytes list");
  }
  return found->second.bytes_list().value(0);
}

}  // namespace feedtune::workloads

// libFuzzer target: the TFRecord framing and index parsers
// (workloads/tfrecord_format.h), on arbitrary bytes.
//
// Input layout:
//   byte 0      what the rest is: even: a TFRecord file; odd: a .idx text
//   the rest    the file
//
// Checks: the only exception is DatasetCorrupt, with a one-line message
// naming the file; every record ScanTfRecords returns lies inside the file,
// records tile it from byte 0; CheckTfRecord on each returns a span inside
// the record, and AppendTfRecord of that data gives back the same framed
// bytes (a record that passes both CRCs is exactly what the writer writes);
// with feature: set, ExampleBytesFeature either finds bytes or names why not.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "workloads/shard_format.h"
#include "workloads/tfrecord_format.h"

namespace {

using feedtune::workloads::DatasetCorrupt;

void Check(bool ok) {
  if (!ok) std::abort();
}

void CheckMessage(const DatasetCorrupt& e, const std::string& name) {
  const std::string what = e.what();
  Check(what.starts_with(name) && what.find('\n') == std::string::npos);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace feedtune::workloads;
  if (size < 1) return 0;
  const auto bytes = std::as_bytes(std::span(data + 1, size - 1));
  const std::string name = "fuzz.tfrecord";
  if (data[0] % 2 == 1) {
    try {
      const auto entries = ParseTfRecordIndex(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()), name);
      for (const auto& e : entries) Check(e.size >= kTfRecordFraming);
    } catch (const DatasetCorrupt& e) {
      CheckMessage(e, name);
    }
    return 0;
  }
  std::vector<TfRecordEntry> entries;
  try {
    entries = ScanTfRecords(bytes, name);
  } catch (const DatasetCorrupt& e) {
    CheckMessage(e, name);
    return 0;
  }
  uint64_t end = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    Check(entries[i].offset == end && entries[i].size >= kTfRecordFraming);
    end += entries[i].size;
    Check(end <= bytes.size());
    const auto framed = bytes.subspan(entries[i].offset, entries[i].size);
    try {
      const auto record = CheckTfRecord(framed, name, static_cast<int64_t>(i), entries[i].offset);
      Check(record.data() >= framed.data() && record.data() + record.size() <= framed.data() + framed.size());
      std::vector<std::byte> again;
      AppendTfRecord(record, &again);
      Check(again.size() == framed.size() && std::memcmp(again.data(), framed.data(), framed.size()) == 0);
      try {
        const std::string value = ExampleBytesFeature(record, "data", name);
        Check(value.size() <= record.size());
      } catch (const DatasetCorrupt& e) {
        CheckMessage(e, name);
      }
    } catch (const DatasetCorrupt& e) {
      CheckMessage(e, name);
    }
  }
  Check(end == bytes.size());
  return 0;
}

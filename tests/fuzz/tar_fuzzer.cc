// libFuzzer target: the tar member index (workloads/tar_format.h), on
// arbitrary bytes read as one archive.
//
// Checks: the only exception is DatasetCorrupt, with a one-line message
// naming the archive; every member's header and data lie inside the archive,
// in increasing order, headers on 512-byte blocks; the samples GroupTarSamples
// makes hold every member whose name has a key, each once, in order.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "workloads/shard_format.h"
#include "workloads/tar_format.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace feedtune::workloads;
  const auto bytes = std::as_bytes(std::span(data, size));
  const std::string name = "fuzz.tar";
  TarScanner scanner(
      [bytes](uint64_t offset, std::span<std::byte> out) -> size_t {
        if (offset >= bytes.size()) return 0;
        const size_t n = std::min<size_t>(out.size(), bytes.size() - offset);
        std::memcpy(out.data(), bytes.data() + offset, n);
        return n;
      },
      size, name);
  std::vector<TarMember> members;
  try {
    TarMember m;
    uint64_t last = 0;
    while (scanner.Next(&m)) {
      Check(m.header_offset % kTarBlock == 0 && m.data_offset == m.header_offset + kTarBlock);
      Check(m.data_offset + m.size <= size && (members.empty() || m.header_offset > last));
      last = m.header_offset;
      members.push_back(m);
    }
  } catch (const DatasetCorrupt& e) {
    const std::string what = e.what();
    Check(what.starts_with(name) && what.find('\n') == std::string::npos);
    return 0;
  }
  size_t keyed = 0;
  std::string key, ext;
  for (const auto& m : members) keyed += SplitTarKey(m.name, &key, &ext) ? 1 : 0;
  size_t grouped = 0;
  for (const auto& sample : GroupTarSamples(members)) {
    Check(!sample.fields.empty());
    grouped += sample.fields.size();
  }
  Check(grouped == keyed);
  return 0;
}

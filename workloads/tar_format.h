// Tar shards in the WebDataset convention (workload.kind: tar).
//
// Read with our own strict reader of the POSIX tar format rather than
// libarchive: access: random needs each member's data offset so a sample can
// be read with pread, and libarchive reads an archive as a stream and does
// not give data offsets; a ~200-line reader that checks every header's
// checksum is also one the fuzzer (tests/fuzz) can drive byte for byte.
//
// What is read: ustar and GNU headers ("ustar\0" "00" and "ustar  \0"), pax
// extended headers (path and size, typeflag x; global g headers skipped) and
// GNU long names (typeflag L); sizes in octal or base-256. Regular files
// (typeflag 0, \0, 7) are members; directories, links and devices are skipped.
// Every header's checksum is checked. The archive ends at a zero block or at
// the end of the file on a block boundary.
//
// Samples: consecutive members whose names share a key (the path up to the
// first dot of the file name, as webdataset's base_plus_ext cuts it) form a
// sample; its fields are the members, by extension ("jpg", "cls", "json",
// ...), and its bytes are the fields' data in member order. A member whose
// file name has no dot belongs to no sample (webdataset skips it too).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace feedtune::workloads {

inline constexpr size_t kTarBlock = 512;

struct TarMember {
  std::string name;
  uint64_t header_offset = 0;
  uint64_t data_offset = 0;
  uint64_t size = 0;
};

// Reads `out.size()` bytes at `offset`; returns how many it got (fewer only
// at the end of the data).
using TarPread = std::function<size_t(uint64_t offset, std::span<std::byte> out)>;

// Walks the members of one archive of `total_bytes` bytes. Throws
// DatasetCorrupt naming `name` and the byte offset: a bad checksum, a header
// that is not ustar, a member cut short, a malformed pax record.
class TarScanner {
 public:
  TarScanner(TarPread pread, uint64_t total_bytes, std::string name);
  // The next regular-file member; false at the end of the archive.
  bool Next(TarMember* member);

 private:
  TarPread pread_;
  const uint64_t total_;
  const std::string name_;
  uint64_t pos_ = 0;
  bool done_ = false;
};

// The key and extension of a member name ("a/b.c.jpg" -> "a/b", "c.jpg");
// false when the file name has no dot.
bool SplitTarKey(const std::string& name, std::string* key, std::string* ext);

struct TarSample {
  std::string key;
  std::vector<TarMember> fields;  // in member order
  uint64_t bytes() const;
};

// The samples of a list of members (consecutive members with one key).
std::vector<TarSample> GroupTarSamples(const std::vector<TarMember>& members);

// A ustar header + data + padding for a regular file `name` (at most 100
// bytes of name) holding `data`, appended to `out`; and the two zero blocks
// that end an archive.
void AppendTarMember(const std::string& name, std::span<const std::byte> data, std::vector<std::byte>* out);
void AppendTarEnd(std::vector<std::byte>* out);

}  // namespace feedtune::workloads

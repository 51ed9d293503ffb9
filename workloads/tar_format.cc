#include "workloads/tar_format.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "workloads/shard_format.h"

namespace feedtune::workloads {
namespace {

// Header fields (offset, length), POSIX ustar.
constexpr size_t kName = 0, kNameLen = 100;
constexpr size_t kSize = 124, kSizeLen = 12;
constexpr size_t kChecksum = 148, kChecksumLen = 8;
constexpr size_t kType = 156;
constexpr size_t kMagic = 257;
constexpr size_t kPrefix = 345, kPrefixLen = 155;

uint64_t RoundUp(uint64_t n) { return (n + kTarBlock - 1) / kTarBlock * kTarBlock; }

std::string Field(const std::byte* block, size_t offset, size_t length) {
  const char* p = reinterpret_cast<const char*>(block + offset);
  return std::string(p, strnlen(p, length));
}

// An octal field (NUL- or space-terminated), or base-256 when its first byte
// has the high bit set (GNU, for sizes of 8 GiB and more). false: malformed.
bool Number(const std::byte* block, size_t offset, size_t length, uint64_t* value) {
  const auto* p = reinterpret_cast<const unsigned char*>(block + offset);
  uint64_t v = 0;
  if (p[0] & 0x80) {
    if (p[0] != 0x80) return false;  // negative or too large
    for (size_t i = 1; i < length; ++i) {
      if (v >> 56) return false;
      v = (v << 8) | p[i];
    }
    *value = v;
    return true;
  }
  size_t i = 0;
  while (i < length && p[i] == ' ') ++i;
  bool digits = false;
  for (; i < length && p[i] >= '0' && p[i] <= '7'; ++i) {
    if (v >> 60) return false;
    v = v * 8 + (p[i] - '0');
    digits = true;
  }
  for (; i < length; ++i) {
    if (p[i] != ' ' && p[i] != '\0') return false;
  }
  *value = v;
  return digits;
}

bool ChecksumOk(const std::byte* block) {
  uint64_t stored = 0;
  if (!Number(block, kChecksum, kChecksumLen, &stored)) return false;
  uint64_t sum_unsigned = 0;
  int64_t sum_signed = 0;  // some old tars summed signed chars
  for (size_t i = 0; i < kTarBlock; ++i) {
    const bool in_field = i >= kChecksum && i < kChecksum + kChecksumLen;
    const auto u = in_field ? static_cast<unsigned char>(' ') : static_cast<unsigned char>(block[i]);
    sum_unsigned += u;
    sum_signed += in_field ? ' ' : static_cast<signed char>(block[i]);
  }
  return stored == sum_unsigned || static_cast<int64_t>(stored) == sum_signed;
}

// A member name as an error message shows it: on one line, whatever bytes
// the archive holds (a GNU long name may hold a newline: the fuzzer's
// regression-longlink-newline), control bytes as \xNN, at most 200 bytes.
std::string Shown(const std::string& name) {
  std::string shown;
  for (const char c : name.substr(0, 200)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      shown += hex;
    } else {
      shown += c;
    }
  }
  return name.size() > 200 ? shown + "..." : shown;
}

bool AllZero(const std::byte* block) {
  return std::all_of(block, block + kTarBlock, [](std::byte b) { return b == std::byte{0}; });
}

}  // namespace

TarScanner::TarScanner(TarPread pread, uint64_t total_bytes, std::string name)
    : pread_(std::move(pread)), total_(total_bytes), name_(std::move(name)) {}

bool TarScanner::Next(TarMember* member) {
  std::string long_name;  // from a pax path record or a GNU L member, for the next header
  bool has_size = false;
  uint64_t pax_size = 0;
  std::byte block[kTarBlock];
  while (!done_) {
    if (pos_ >= total_) break;  // the end of the file on a block boundary
    const std::string at = name_ + ": byte " + std::to_string(pos_);
    if (total_ - pos_ < kTarBlock || pread_(pos_, block) != kTarBlock) {
      throw DatasetCorrupt(at + ": a tar header cut short (" + std::to_string(total_ - pos_) + " bytes left of 512)");
    }
    if (AllZero(block)) break;
    if (!ChecksumOk(block)) throw DatasetCorrupt(at + ": a tar header with a bad checksum (not a tar file, or damaged)");
    if (std::memcmp(block + kMagic, "ustar", 5) != 0) {
      throw DatasetCorrupt(at + ": not a ustar header (pre-POSIX tar archives are not read)");
    }
    uint64_t size = 0;
    if (!Number(block, kSize, kSizeLen, &size)) throw DatasetCorrupt(at + ": a tar header with a malformed size");
    if (has_size) size = pax_size;
    const char type = static_cast<char>(block[kType]);
    const uint64_t data = pos_ + kTarBlock;
    std::string name = Field(block, kName, kNameLen);
    const std::string prefix = Field(block, kPrefix, kPrefixLen);
    if (!prefix.empty()) name = prefix + "/" + name;
    if (!long_name.empty()) name = long_name;
    if (size > total_ - data) {
      throw DatasetCorrupt(name_ + ": member '" + Shown(name) + "' at byte " + std::to_string(pos_) +
                           " is cut short: its header says " + std::to_string(size) + " bytes, " +
                           std::to_string(total_ - data) + " are left");
    }
    pos_ = data + RoundUp(size);
    if (type == 'x' || type == 'L') {
      if (size > (uint64_t{1} << 20)) throw DatasetCorrupt(at + ": an extended header of " + std::to_string(size) + " bytes");
      std::string text(size, '\0');
      if (pread_(data, std::as_writable_bytes(std::span(text.data(), text.size()))) != size) {
        throw DatasetCorrupt(at + ": an extended header cut short");
      }
      if (type == 'L') {
        long_name = text.substr(0, text.find('\0'));
        continue;
      }
      // pax records: "LEN key=value\n", LEN counting the whole record.
      size_t p = 0;
      while (p < text.size()) {
        size_t len = 0, q = p;
        while (q < text.size() && text[q] >= '0' && text[q] <= '9' && len < text.size()) len = len * 10 + static_cast<size_t>(text[q++] - '0');
        if (q == p || q >= text.size() || text[q] != ' ' || len <= q - p || p + len > text.size() ||
            text[p + len - 1] != '\n') {
          throw DatasetCorrupt(at + ": a malformed pax record");
        }
        const std::string record = text.substr(q + 1, p + len - 1 - (q + 1));
        const size_t eq = record.find('=');
        if (eq == std::string::npos) throw DatasetCorrupt(at + ": a pax record without '='");
        const std::string key = record.substr(0, eq), value = record.substr(eq + 1);
        if (key == "path") long_name = value;
        if (key == "size") {
          char* end = nullptr;
          pax_size = std::strtoull(value.c_str(), &end, 10);
          if (value.empty() || *end != '\0') throw DatasetCorrupt(at + ": a pax size that is not a number");
          has_size = true;
        }
        p += len;
      }
      continue;
    }
    if (type == '0' || type == '\0' || type == '7') {
      *member = TarMember{name, data - kTarBlock, data, size};
      return true;
    }
    long_name.clear();  // a directory, link or device: skipped, with its own extended name
    has_size = false;
  }
  done_ = true;
  return false;
}

bool SplitTarKey(const std::string& name, std::string* key, std::string* ext) {
  const size_t slash = name.rfind('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  const size_t dot = name.find('.', base);
  if (dot == std::string::npos || dot == base) return false;
  *key = name.substr(0, dot);
  *ext = name.substr(dot + 1);
  return true;
}

uint64_t TarSample::bytes() const {
  uint64_t total = 0;
  for (const auto& f : fields) total += f.size;
  return total;
}

std::vector<TarSample> GroupTarSamples(const std::vector<TarMember>& members) {
  std::vector<TarSample> samples;
  std::string key, ext;
  for (const auto& m : members) {
    if (!SplitTarKey(m.name, &key, &ext)) continue;
    if (samples.empty() || samples.back().key != key) samples.push_back(TarSample{key, {}});
    samples.back().fields.push_back(m);
  }
  return samples;
}

void AppendTarMember(const std::string& name, std::span<const std::byte> data, std::vector<std::byte>* out) {
  std::byte header[kTarBlock] = {};
  auto put = [&](size_t offset, const std::string& text) { std::memcpy(header + offset, text.data(), text.size()); };
  put(kName, name.substr(0, kNameLen));
  put(100, "0000644");
  put(108, "0000000");
  put(116, "0000000");
  char number[16];
  std::snprintf(number, sizeof number, "%011llo", static_cast<unsigned long long>(data.size()));
  put(kSize, number);
  put(136, "00000000000");
  header[kType] = std::byte{'0'};
  std::memcpy(header + kMagic, "ustar\0" "00", 8);
  std::memset(header + kChecksum, ' ', kChecksumLen);
  unsigned sum = 0;
  for (const std::byte b : header) sum += static_cast<unsigned char>(b);
  std::snprintf(number, sizeof number, "%06o", sum);
  std::memcpy(header + kChecksum, number, 7);  // six digits, NUL, then the space already there
  out->insert(out->end(), header, header + kTarBlock);
  out->insert(out->end(), data.begin(), data.end());
  out->resize(RoundUp(out->size()), std::byte{0});
}

void AppendTarEnd(std::vector<std::byte>* out) { out->resize(out->size() + 2 * kTarBlock, std::byte{0}); }

}  // namespace feedtune::workloads

#include "workloads/npy_format.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string_view>

#include "workloads/format_io.h"
#include "workloads/shard_format.h"

namespace feedtune::workloads {
namespace {

constexpr size_t kPreambleV1 = 10;  // magic 6 + version 2 + u16 length
constexpr size_t kPreambleV2 = 12;  // magic 6 + version 2 + u32 length
constexpr int64_t kMaxDimension = int64_t{1} << 48;

[[noreturn]] void Bad(const std::string& path, const std::string& what) {
  throw DatasetCorrupt(path + ": not a valid .npy file: " + what);
}

// A cursor over the header's dict text, with the header's byte offsets for messages.
class DictReader {
 public:
  DictReader(std::string_view text, size_t base, const std::string& path) : text_(text), base_(base), path_(path) {}

  [[noreturn]] void Fail(const std::string& what) const { FailAt(pos_, what); }
  [[noreturn]] void FailAt(size_t pos, const std::string& what) const {
    Bad(path_, "header " + what + " at byte " + std::to_string(base_ + pos));
  }
  size_t Position() {
    SkipSpace();
    return pos_;
  }
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Peek(char c) {
    SkipSpace();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  void Expect(char c, const char* what) {
    if (!Peek(c)) Fail(std::string("expected ") + what);
    ++pos_;
  }
  bool TakeIf(char c) {
    if (!Peek(c)) return false;
    ++pos_;
    return true;
  }
  // A Python string literal in ' or " quotes, without escapes (numpy writes none).
  std::string String(const char* what) {
    SkipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) Fail(std::string("expected ") + what);
    const char quote = text_[pos_++];
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\' || text_[pos_] == '\n') Fail(std::string("unsupported character in ") + what);
      ++pos_;
    }
    if (pos_ >= text_.size()) Fail(std::string("unterminated ") + what);
    return std::string(text_.substr(start, pos_++ - start));
  }
  bool Boolean(const char* what) {
    SkipSpace();
    for (const auto& [word, value] : {std::pair<std::string_view, bool>{"True", true}, {"False", false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    Fail(std::string("expected True or False for ") + what);
  }
  int64_t Integer(const char* what) {
    SkipSpace();
    int64_t v = 0;
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      v = v * 10 + (text_[pos_] - '0');
      if (v > kMaxDimension) Fail(std::string(what) + " too large");
      ++pos_;
    }
    if (pos_ == start) Fail(std::string("expected a non-negative integer in ") + what);
    // Python 2's numpy wrote long literals as "1000L".
    if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;
    return v;
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ >= text_.size();
  }

 private:
  std::string_view text_;
  size_t base_;
  const std::string& path_;
  size_t pos_ = 0;
};

// Bytes of one element of a plain dtype string ("<f4", "|u1", "<U10",
// "<M8[ns]"); fails for structured, object and unknown dtypes.
int64_t ItemBytes(const std::string& descr, const std::string& path) {
  const auto bad = [&](const std::string& why) -> int64_t {
    Bad(path, "dtype '" + descr + "' " + why);
  };
  size_t pos = 0;
  if (pos < descr.size() && std::strchr("<>|=", descr[pos]) != nullptr) ++pos;
  if (pos >= descr.size()) return bad("has no type code");
  const char code = descr[pos++];
  if (code == 'O') return bad("holds Python objects (pickled), which have no fixed size: save a numeric array");
  if (code == '?' && pos == descr.size()) return 1;
  if (std::strchr("biufcSUVMm?", code) == nullptr) return bad("is not a dtype feedtune can size");
  int64_t n = 0;
  const size_t digits = pos;
  while (pos < descr.size() && descr[pos] >= '0' && descr[pos] <= '9') {
    n = n * 10 + (descr[pos++] - '0');
    if (n > kMaxNpySampleBytes) return bad("has an item size that is too large");
  }
  if (pos == digits || n == 0) return bad("has no item size");
  if (code == 'M' || code == 'm') {  // datetime64/timedelta64: "<M8[ns]"
    if (n != 8) return bad("is a datetime of other than 8 bytes");
    if (pos < descr.size()) {
      if (descr[pos] != '[' || descr.back() != ']') return bad("has a malformed unit");
      pos = descr.size();
    }
  }
  if (pos != descr.size()) return bad("has trailing characters");
  const auto one_of = [&](std::initializer_list<int64_t> sizes) {
    for (int64_t s : sizes) {
      if (s == n) return true;
    }
    return false;
  };
  switch (code) {
    case 'b':
    case '?':
      if (n != 1) return bad("is a bool of other than 1 byte");
      break;
    case 'i':
    case 'u':
      if (!one_of({1, 2, 4, 8})) return bad("is an integer of an unknown size");
      break;
    case 'f':
      if (!one_of({2, 4, 8, 12, 16})) return bad("is a float of an unknown size");
      break;
    case 'c':
      if (!one_of({8, 16, 24, 32})) return bad("is a complex of an unknown size");
      break;
    case 'U':
      return n > kMaxNpySampleBytes / 4 ? bad("has an item size that is too large") : n * 4;  // UCS-4
    default:
      break;
  }
  return n;
}

uint32_t LittleEndian(std::span<const std::byte> bytes) {
  uint32_t v = 0;
  for (size_t i = bytes.size(); i-- > 0;) v = (v << 8) | static_cast<uint32_t>(bytes[i]);
  return v;
}

}  // namespace

std::string NpyHeader::ShapeText() const {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) out += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  return out + (shape.size() == 1 ? ",)" : ")");
}

int64_t NpyHeaderBytes(std::span<const std::byte> first, const std::string& path) {
  if (first.size() < sizeof kNpyMagic || std::memcmp(first.data(), kNpyMagic, sizeof kNpyMagic) != 0) {
    Bad(path, first.size() < sizeof kNpyMagic ? "the file is shorter than the .npy magic"
                                              : "the file does not start with the .npy magic \"\\x93NUMPY\"");
  }
  if (first.size() < kPreambleV1) Bad(path, "the file ends inside the header's preamble");
  const int major = static_cast<int>(first[6]);
  const int minor = static_cast<int>(first[7]);
  if (major < 1 || major > 3 || minor != 0) {
    Bad(path, "format version " + std::to_string(major) + "." + std::to_string(minor) +
                  " (feedtune reads 1.0, 2.0 and 3.0)");
  }
  if (major >= 2 && first.size() < kPreambleV2) Bad(path, "the file ends inside the header's preamble");
  const size_t preamble = major == 1 ? kPreambleV1 : kPreambleV2;
  const int64_t length = LittleEndian(first.subspan(8, preamble - 8));
  if (length > kMaxNpyHeaderBytes) {
    Bad(path, "a header of " + std::to_string(length) + " bytes (more than " + std::to_string(kMaxNpyHeaderBytes) +
                  " is not written by numpy)");
  }
  return static_cast<int64_t>(preamble) + length;
}

NpyHeader ParseNpyHeader(std::span<const std::byte> prefix, const std::string& path) {
  const int64_t total = NpyHeaderBytes(prefix, path);
  if (static_cast<int64_t>(prefix.size()) < total) {
    Bad(path, "the file ends inside the header (" + std::to_string(total) + " bytes announced, " +
                  std::to_string(prefix.size()) + " present)");
  }
  NpyHeader header;
  header.major = static_cast<int>(prefix[6]);
  header.minor = static_cast<int>(prefix[7]);
  const size_t preamble = header.major == 1 ? kPreambleV1 : kPreambleV2;
  header.data_offset = total;
  const std::string_view text(reinterpret_cast<const char*>(prefix.data()) + preamble,
                              static_cast<size_t>(total) - preamble);
  if (text.find('\0') != std::string_view::npos) Bad(path, "the header text holds a NUL byte");

  DictReader in(text, preamble, path);
  in.Expect('{', "'{' (a dict)");
  bool have_descr = false, have_order = false, have_shape = false;
  while (!in.TakeIf('}')) {
    const size_t key_pos = in.Position();
    const std::string key = in.String("a key in quotes");
    in.Expect(':', "':' after a key");
    bool* seen = nullptr;
    if (key == "descr") {
      seen = &have_descr;
      if (in.Peek('[')) {
        Bad(path, "a structured dtype (a list descr): feedtune reads arrays of one plain dtype");
      }
      header.descr = in.String("the dtype string for 'descr'");
    } else if (key == "fortran_order") {
      seen = &have_order;
      header.fortran_order = in.Boolean("'fortran_order'");
    } else if (key == "shape") {
      seen = &have_shape;
      in.Expect('(', "a tuple for 'shape'");
      header.shape.clear();
      while (!in.TakeIf(')')) {
        header.shape.push_back(in.Integer("'shape'"));
        if (header.shape.size() > 64) in.Fail("'shape' has more than 64 dimensions");
        if (!in.TakeIf(',')) {
          in.Expect(')', "',' or ')' in 'shape'");
          break;
        }
      }
    } else {
      in.FailAt(key_pos, "has an unknown key '" + key + "' (expected descr, fortran_order, shape)");
    }
    if (*seen) in.FailAt(key_pos, "repeats the key '" + key + "'");
    *seen = true;
    if (!in.TakeIf(',')) {
      in.Expect('}', "',' or '}' after a value");
      break;
    }
  }
  if (!in.AtEnd()) in.Fail("has text after the dict");
  if (!have_descr || !have_order || !have_shape) {
    Bad(path, std::string("the header lacks the key '") + (!have_descr ? "descr" : !have_order ? "fortran_order" : "shape") +
                  "'");
  }
  header.item_bytes = ItemBytes(header.descr, path);
  if (header.shape.empty()) Bad(path, "a 0-d array (shape ()) has no samples along axis 0");
  if (header.fortran_order && header.shape.size() > 1) {
    Bad(path, "Fortran order: a sample is not contiguous; save it in C order (np.ascontiguousarray)");
  }
  header.samples = header.shape[0];
  if (header.samples == 0) Bad(path, "shape " + header.ShapeText() + " has no samples along axis 0");
  int64_t bytes = header.item_bytes;
  for (size_t d = 1; d < header.shape.size(); ++d) {
    const int64_t dim = header.shape[d];
    if (dim != 0 && bytes > kMaxNpySampleBytes / dim) {
      Bad(path, "one sample of shape " + header.ShapeText() + " is larger than " +
                    std::to_string(kMaxNpySampleBytes) + " bytes");
    }
    bytes *= dim;
  }
  if (bytes == 0) Bad(path, "shape " + header.ShapeText() + " makes every sample empty");
  if (bytes > kMaxNpySampleBytes) {
    Bad(path, "one sample of shape " + header.ShapeText() + " is larger than " + std::to_string(kMaxNpySampleBytes) +
                  " bytes");
  }
  header.sample_bytes = bytes;
  if (header.samples > std::numeric_limits<int64_t>::max() / header.sample_bytes - header.data_offset) {
    Bad(path, "shape " + header.ShapeText() + " is larger than any file");
  }
  return header;
}

NpyWriter::NpyWriter(std::string path, int64_t samples, int64_t sample_bytes)
    : path_(std::move(path)), samples_(samples), sample_bytes_(sample_bytes) {
  if (samples < 1 || sample_bytes < 1) throw std::invalid_argument("NpyWriter: samples and sample_bytes must be >= 1");
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int error = errno;
    throw std::runtime_error(path_ + ": cannot create: " + ErrnoText(error) +
                             (error == EEXIST ? "; choose another --out or remove it" : ""));
  }
  std::string dict = "{'descr': '|u1', 'fortran_order': False, 'shape': (" + std::to_string(samples) + ", " +
                     std::to_string(sample_bytes) + "), }";
  // Pad with spaces so the data starts on a 64-byte boundary, then '\n'.
  const size_t unpadded = kPreambleV1 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  char preamble[kPreambleV1];
  std::memcpy(preamble, kNpyMagic, sizeof kNpyMagic);
  preamble[6] = 1;
  preamble[7] = 0;
  preamble[8] = static_cast<char>(dict.size() & 0xff);
  preamble[9] = static_cast<char>(dict.size() >> 8);
  Write(preamble, sizeof preamble);
  Write(dict.data(), dict.size());
}

NpyWriter::~NpyWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!finished_) ::unlink(path_.c_str());  // a partial array would announce rows it lacks
}

void NpyWriter::Write(const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(path_ + ": write failed: " + ErrnoText(errno));
    p += n;
    size -= static_cast<size_t>(n);
    bytes_written_ += n;
  }
}

void NpyWriter::Add(std::span<const std::byte> row) {
  if (static_cast<int64_t>(row.size()) != sample_bytes_ || rows_ >= samples_) {
    throw std::logic_error("NpyWriter::Add: a row of " + std::to_string(row.size()) + " bytes as row " +
                           std::to_string(rows_) + " of (" + std::to_string(samples_) + ", " +
                           std::to_string(sample_bytes_) + ")");
  }
  Write(row.data(), row.size());
  ++rows_;
}

void NpyWriter::Finish() {
  if (rows_ != samples_) {
    throw std::logic_error("NpyWriter::Finish: " + std::to_string(rows_) + " of " + std::to_string(samples_) +
                           " rows written");
  }
  if (::fsync(fd_) != 0) throw std::runtime_error(path_ + ": fsync failed: " + ErrnoText(errno));
  if (::close(fd_) != 0) {
    fd_ = -1;
    throw std::runtime_error(path_ + ": close failed: " + ErrnoText(errno));
  }
  fd_ = -1;
  finished_ = true;
}

}  // namespace feedtune::workloads

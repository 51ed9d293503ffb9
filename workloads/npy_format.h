// The NumPy .npy format (numpy.lib.format, versions 1.0, 2.0 and 3.0): the
// header parser the npy dataset and `feedtune inspect` read with, and the
// writer behind `feedtune gen-data --layout npy`.
//
//   "\x93NUMPY" u8 major u8 minor   magic and version
//   u16 (1.x) | u32 (2.x, 3.x) HEADER_LEN, little-endian
//   HEADER_LEN bytes: a Python dict literal, e.g.
//       {'descr': '<f4', 'fortran_order': False, 'shape': (1000, 3, 224, 224), }
//     padded with spaces and ended by '\n' (latin-1 in 1.x/2.x, UTF-8 in 3.x)
//   the array's bytes, C order: row i (everything under index i of axis 0) at
//   data_offset + i * sample_bytes
//
// There is no C library for this header, so it is parsed here, strictly:
// exactly the keys descr, fortran_order and shape; a plain dtype with a fixed
// item size (no structured or object dtypes); C order when rank > 1; sizes
// that overflow nothing. ParseNpyHeader is a pure function (fuzzed in
// tests/fuzz/npy_header_fuzzer.cc). NpyWriter is used by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace feedtune::workloads {

inline constexpr char kNpyMagic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
// Longest header accepted (numpy itself refuses more than 10000 bytes by default).
inline constexpr int64_t kMaxNpyHeaderBytes = int64_t{1} << 20;
// One sample must fit a loader slot.
inline constexpr int64_t kMaxNpySampleBytes = int64_t{1} << 30;

struct NpyHeader {
  int major = 0;
  int minor = 0;
  std::string descr;           // as written, e.g. "<f4", "|u1"
  bool fortran_order = false;
  std::vector<int64_t> shape;  // rank >= 1
  int64_t item_bytes = 0;      // of one element of descr
  int64_t data_offset = 0;     // where the array's bytes start
  int64_t samples = 0;         // shape[0]
  int64_t sample_bytes = 0;    // item_bytes * product of shape[1:]

  // "(1000, 3, 224, 224)"
  std::string ShapeText() const;
};

// The bytes that must be read from the start of a file to parse its header:
// needs the first 12 bytes (fewer: the file is too short, say so); throws the
// same errors as ParseNpyHeader for a bad magic, version or length.
int64_t NpyHeaderBytes(std::span<const std::byte> first, const std::string& path);

// Parses the header at the start of `prefix` (at least NpyHeaderBytes of it).
// Throws DatasetCorrupt whose message starts with `path` and says what is
// wrong and where (byte offset in the header), e.g.
//   "x.npy: not a .npy header: 'shape' expected a tuple of integers at byte 64".
NpyHeader ParseNpyHeader(std::span<const std::byte> prefix, const std::string& path);

// Writes an array of shape (samples, sample_bytes), dtype uint8 ('|u1'),
// format 1.0, data aligned to 64 bytes as numpy aligns it. The file must not
// exist. An unfinished writer removes its file on destruction.
class NpyWriter {
 public:
  NpyWriter(std::string path, int64_t samples, int64_t sample_bytes);
  NpyWriter(const NpyWriter&) = delete;
  NpyWriter& operator=(const NpyWriter&) = delete;
  ~NpyWriter();

  // Appends row i (exactly sample_bytes bytes). Throws std::runtime_error on a write error.
  void Add(std::span<const std::byte> row);
  // Checks every row was written, syncs the file. Throws std::runtime_error.
  void Finish();

  int64_t bytes_written() const { return bytes_written_; }

 private:
  void Write(const void* data, size_t size);

  const std::string path_;
  const int64_t samples_;
  const int64_t sample_bytes_;
  int fd_ = -1;
  int64_t rows_ = 0;
  int64_t bytes_written_ = 0;
  bool finished_ = false;
};

}  // namespace feedtune::workloads

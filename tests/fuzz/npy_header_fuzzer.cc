// libFuzzer target npy_fuzzer: the .npy header parser (workloads/npy_format.h), a pure
// function over the first bytes of a file.
//
// Input: the start of a .npy file (magic, version, header length, the Python
// dict literal). NpyHeaderBytes says how much of it the header needs; when
// the input holds that much, ParseNpyHeader parses it.
//
// Checks: the only exception is DatasetCorrupt, with a one-line message that
// starts with the file's name; a header that parses is consistent: version
// 1-3, rank >= 1, data_offset == the header length NpyHeaderBytes announced,
// samples == shape[0], sample_bytes == item_bytes x the rest of the shape and
// within the slot bound, no negative dimension, C order when rank > 1.
//
// Seeds (corpus/npy): headers of numpy 1.24 (np.save of uint8, <f4, >i8,
// <U3 arrays, versions 1.0, 2.0 and 3.0, shapes of rank 1-4) and gen-data's.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>

#include "workloads/npy_format.h"
#include "workloads/shard_format.h"

namespace {

constexpr const char* kPath = "fuzz.npy";

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "npy_header_fuzzer: %s\n", what.c_str());
  std::abort();
}

void CheckMessage(const std::string& message) {
  if (message.rfind(kPath, 0) != 0) Fail("message does not start with the file: " + message);
  if (message.find('\n') != std::string::npos) Fail("message spans lines: " + message);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace feedtune::workloads;
  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
  int64_t need = 0;
  try {
    need = NpyHeaderBytes(input, kPath);
  } catch (const DatasetCorrupt& e) {
    CheckMessage(e.what());
    return 0;
  }
  if (need < 10 || need > kMaxNpyHeaderBytes + 12) Fail("NpyHeaderBytes out of range: " + std::to_string(need));
  if (static_cast<size_t>(need) > size) return 0;
  NpyHeader h;
  try {
    h = ParseNpyHeader(input.first(static_cast<size_t>(need)), kPath);
  } catch (const DatasetCorrupt& e) {
    CheckMessage(e.what());
    return 0;
  }
  if (h.major < 1 || h.major > 3) Fail("version " + std::to_string(h.major));
  if (h.shape.empty()) Fail("rank 0 accepted");
  if (h.data_offset != need) Fail("data_offset " + std::to_string(h.data_offset) + " != " + std::to_string(need));
  if (h.samples != h.shape[0]) Fail("samples != shape[0]");
  int64_t rest = h.item_bytes;
  for (size_t i = 0; i < h.shape.size(); ++i) {
    if (h.shape[i] < 0) Fail("negative dimension");
    if (i > 0) {
      if (h.shape[i] != 0 && rest > INT64_MAX / h.shape[i]) Fail("sample_bytes overflows");
      rest *= h.shape[i];
    }
  }
  if (h.item_bytes < 1) Fail("item_bytes " + std::to_string(h.item_bytes));
  if (rest != h.sample_bytes) Fail("sample_bytes " + std::to_string(h.sample_bytes) + " != " + std::to_string(rest));
  if (h.sample_bytes > kMaxNpySampleBytes) Fail("sample_bytes over the slot bound");
  if (h.fortran_order && h.shape.size() > 1) Fail("Fortran order accepted with rank > 1");
  return 0;
}

// libFuzzer target: the JPEG sample path (workloads/jpeg_image.h: header,
// crop window, DCT scale, TurboJPEG decode, bilinear resize), on damaged and
// forged JPEG files.
//
// Input layout:
//   byte 0        bit 0: crop center (else random); bits 1-7: the crop's seed
//   byte 1        resize = 1 + byte (1-256)
//   the rest      the JPEG file
//
// Checks: the only exception is JpegError, with a non-empty one-line message;
// a decode that succeeds agrees with ReadJpegHeader, its crop lies inside the
// image, its scale is 1/1 or at most 1/2 with the scaled crop still covering
// the target, and its decoded size is the scaled image size. Images over 4
// megapixels are refused (max_pixels), so that a forged header cannot ask for
// more memory than libFuzzer's limit; the product limit is 179 megapixels.
//
// libjpeg-turbo comes from Debian without coverage instrumentation: the
// fuzzer steers by the coverage of feedtune's code and by TurboJPEG's error
// paths as they show in it. Seeds (corpus/jpeg): gen-data --layout jpeg
// images of 8x8 to 96x64 at qualities 50-95, each behind the two bytes above:
//   feedtune gen-data -q --layout jpeg --out /tmp/j --samples 1 --image-size 48x32 --quality 75
//   { printf "\x0e\x4a"; cat /tmp/j/00000/000000000.jpg; } > corpus/jpeg/gen-48x32-q75-random.bin
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "workloads/jpeg_image.h"

namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "jpeg_fuzzer: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace feedtune::workloads;
  if (size < 2) return 0;
  JpegDecodeOptions options;
  options.crop = (data[0] & 1) != 0 ? CropMode::kCenter : CropMode::kRandom;
  options.seed = data[0] >> 1;
  options.resize = 1 + data[1];
  options.max_pixels = 4'000'000;
  const std::span<const std::byte> jpeg(reinterpret_cast<const std::byte*>(data + 2), size - 2);
  std::vector<std::byte> out(static_cast<size_t>(options.resize) * static_cast<size_t>(options.resize) * 3);
  JpegDecodeInfo info;
  try {
    info = DecodeCropResize(jpeg, 7, options, out);
  } catch (const JpegError& e) {
    const std::string message = e.what();
    if (message.empty() || message.find('\n') != std::string::npos) Fail("bad message: '" + message + "'");
    return 0;
  }
  const JpegHeader header = ReadJpegHeader(jpeg);
  if (header.width != info.header.width || header.height != info.header.height) Fail("header disagrees");
  const CropWindow& c = info.crop;
  if (c.x < 0 || c.y < 0 || c.width < 1 || c.height < 1 || c.x + c.width > header.width ||
      c.y + c.height > header.height) {
    Fail("crop outside the image");
  }
  const JpegScale s = info.scale;
  if (!(s == JpegScale{1, 1})) {
    if (s.num * 2 > s.denom) Fail("scaled decode above 1/2");
    const auto scaled = [&](int v) { return (v * s.num + s.denom - 1) / s.denom; };
    if (scaled(c.width) < options.resize || scaled(c.height) < options.resize) Fail("scaled crop under the target");
  }
  if (info.decoded_width != (header.width * s.num + s.denom - 1) / s.denom ||
      info.decoded_height != (header.height * s.num + s.denom - 1) / s.denom) {
    Fail("decoded size is not the scaled image size");
  }
  return 0;
}

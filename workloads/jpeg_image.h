// JPEG samples: the decode + RandomResizedCrop + Resize path of an image
// pipeline, natively, on libjpeg-turbo's TurboJPEG API (Debian's
// libturbojpeg0-dev), and the writer behind `feedtune gen-data --layout jpeg`.
//
// DecodeCropResize, per sample:
//   1. the header gives the image's size; the crop window is chosen in image
//      pixels (CropWindowFor: torchvision's RandomResizedCrop.get_params with
//      scale (0.08, 1) and ratio (3/4, 4/3), drawn from a generator seeded by
//      (seed, epoch, index); or the central square of 0.875 of the short side,
//      as Resize(256) + CenterCrop(224) takes);
//   2. the whole image is decoded to RGB with DCT scaling when the crop is at
//      least twice the target on both sides (ChooseScale: the smallest of
//      libjpeg-turbo's factors <= 1/2 that keeps the scaled crop >= resize), so
//      a 2000 px photo is decoded at 1/4 or 1/8 of its pixels, as DALI and
//      PIL's draft mode do;
//   3. the crop, mapped into the decoded image, is resized bilinearly
//      (half-pixel centres, no antialiasing; after DCT scaling the remaining
//      reduction is under 2x) to resize x resize x 3 bytes, the sample.
// A corrupt or truncated JPEG is a JpegError carrying libjpeg-turbo's reason;
// libjpeg's other warnings (extraneous bytes before a marker, which real
// data sets have and PIL accepts) are not errors.
//
// Plain functions and one RAII type; no shared state. Each call makes its own
// TurboJPEG handle (a few microseconds against milliseconds of decoding), so
// every function is safe from any thread and in forked processes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "workloads/options.h"

namespace feedtune::workloads {

class JpegError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Owns one tjhandle (tjInitDecompress or tjInitCompress); tjDestroy on
// destruction. Move-only.
class TurboJpegHandle {
 public:
  enum class Kind { kDecompress, kCompress };
  explicit TurboJpegHandle(Kind kind);  // throws JpegError when TurboJPEG cannot make one
  TurboJpegHandle(TurboJpegHandle&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }
  TurboJpegHandle& operator=(TurboJpegHandle&&) = delete;
  TurboJpegHandle(const TurboJpegHandle&) = delete;
  TurboJpegHandle& operator=(const TurboJpegHandle&) = delete;
  ~TurboJpegHandle();

  void* get() const { return handle_; }
  // The reason of the handle's last failure (tjGetErrorStr2).
  std::string LastError() const;
  // Whether the last failure was only a warning (tjGetErrorCode == TJERR_WARNING).
  bool LastWasWarning() const;

 private:
  void* handle_ = nullptr;  // tjhandle
};

struct JpegHeader {
  int width = 0;
  int height = 0;
  int subsampling = 0;  // TJSAMP_*
  int colorspace = 0;   // TJCS_*
};

// Reads the header of the JPEG in `jpeg`. Throws JpegError ("not a JPEG: ...").
JpegHeader ReadJpegHeader(std::span<const std::byte> jpeg);

// A crop, in pixels of the full-size image.
struct CropWindow {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;

  bool operator==(const CropWindow&) const = default;
};

// torchvision's RandomResizedCrop.get_params(scale=(0.08, 1), ratio=(3/4, 4/3))
// for an image of width x height, drawn from a generator seeded by (seed,
// epoch, index): the same window for the same four, on every platform.
CropWindow RandomResizedCropWindow(int width, int height, uint64_t seed, int64_t epoch, int64_t index);
// The central square of side round(0.875 x the short side), at least 1.
CropWindow CenterCropWindow(int width, int height);
CropWindow CropWindowFor(CropMode mode, int width, int height, uint64_t seed, int64_t epoch, int64_t index);

// A DCT scaling factor of libjpeg-turbo: decoded size = ceil(size x num / denom).
struct JpegScale {
  int num = 1;
  int denom = 1;

  bool operator==(const JpegScale&) const = default;
};

// The factor to decode a crop of crop_width x crop_height with so that it
// still covers resize x resize: the smallest factor <= 1/2 that libjpeg-turbo
// offers whose scaled crop is >= resize on both sides; 1/1 when none is (a
// crop under twice the target).
JpegScale ChooseScale(int crop_width, int crop_height, int resize);

// Bilinear resize of `crop` (in pixels of an RGB image src_width x src_height,
// rows `src_stride` bytes apart) to out_size x out_size x 3 bytes in `out`:
// half-pixel centres, sample positions clamped to the crop. The crop may be
// fractional (a window mapped into a DCT-scaled image).
struct CropBox {
  double x = 0, y = 0, width = 0, height = 0;
};
void ResizeBilinearRgb(const uint8_t* src, int src_width, int src_height, size_t src_stride, const CropBox& crop,
                       int out_size, uint8_t* out);

struct JpegDecodeOptions {
  CropMode crop = CropMode::kRandom;
  int resize = static_cast<int>(kDefaultResize);
  uint64_t seed = 0;
  int64_t epoch = 0;
  // Refused above this many pixels (width x height in the header): a 65500 x
  // 65500 header would ask for 12 GB. PIL refuses past 2 x 89.5 M.
  int64_t max_pixels = int64_t{179} * 1000 * 1000;
};

// What one decode did.
struct JpegDecodeInfo {
  JpegHeader header;
  CropWindow crop;
  JpegScale scale;
  int decoded_width = 0;
  int decoded_height = 0;
};

// Decodes the JPEG in `jpeg` (sample `index`; or takes the raw pixels of a
// PPM, below), crops and resizes it into
// `out`, which must hold resize x resize x 3 bytes. Throws JpegError with the
// reason (corrupt, truncated, too large, a colour space TurboJPEG cannot
// convert to RGB); the caller names the file.
JpegDecodeInfo DecodeCropResize(std::span<const std::byte> jpeg, int64_t index, const JpegDecodeOptions& options,
                                std::span<std::byte> out);

// Raw pixels: an image decoded once, stored as binary PPM ("P6\nW H\n255\n"
// and W x H x 3 RGB bytes), as `feedtune convert --pixels` writes JPEG
// samples. DecodeCropResize takes such a sample as it takes a JPEG, with the
// same crop and resize and no decode: bytes on disk traded for decode CPU.
struct PpmImage {
  int width = 0;
  int height = 0;
  const uint8_t* rgb = nullptr;  // into the parsed bytes
};
bool IsPpm(std::span<const std::byte> data);
// Throws JpegError for a damaged header, a maxval other than 255, or pixels
// that do not fill width x height x 3 exactly.
PpmImage ParsePpm(std::span<const std::byte> data);
// The whole JPEG decoded at full size, as a PPM. Throws JpegError as DecodeCropResize.
std::vector<std::byte> DecodeToPpm(std::span<const std::byte> jpeg,
                                   int64_t max_pixels = JpegDecodeOptions{}.max_pixels);

// Whether a file name ends in .jpg, .jpeg or .jpe (any case, as ImageNet's .JPEG).
bool HasJpegExtension(std::string_view path);
// Whether it ends in .ppm (any case): raw pixels, as `convert --pixels` writes them.
bool HasPpmExtension(std::string_view path);

// gen-data's natural-image-like content for (seed, index): a smooth two-colour
// gradient with a low-frequency shading, a few blurred-edge ellipses and
// rectangles with their own gradients and fine texture, and pixel noise, so a
// JPEG of it compresses like a photograph (500 x 375 at quality 90: about
// 100 KB), not like a flat picture. `rgb` holds width x height x 3 bytes.
void SynthesizeImage(uint64_t seed, int64_t index, int width, int height, std::span<uint8_t> rgb);

// Encodes width x height x 3 RGB bytes as a baseline JPEG, 4:2:0, at `quality`.
std::vector<std::byte> EncodeJpeg(std::span<const uint8_t> rgb, int width, int height, int quality);

}  // namespace feedtune::workloads

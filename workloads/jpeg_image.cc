#include "workloads/jpeg_image.h"

#include <turbojpeg.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <numbers>

namespace feedtune::workloads {
namespace {

// A small deterministic generator (splitmix64): the same stream on every
// platform, unlike std::uniform_*_distribution.
class SplitMix {
 public:
  explicit SplitMix(uint64_t state) : state_(state) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi).
  double Uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(Next() >> 11) * 0x1.0p-53;
  }
  // Uniform integer in [0, n), n < 2^31 (the bias of the modulo is below 2^-32).
  int64_t Below(int64_t n) { return static_cast<int64_t>(Next() % static_cast<uint64_t>(n)); }

 private:
  uint64_t state_;
};

uint64_t Mix(uint64_t a, uint64_t b) {
  SplitMix m(a ^ (b * 0xd6e8feb86659fd93ULL));
  return m.Next();
}

uint64_t CropSeed(uint64_t seed, int64_t epoch, int64_t index) {
  return Mix(Mix(Mix(seed, 0x63726f70 /* "crop" */), static_cast<uint64_t>(epoch)), static_cast<uint64_t>(index));
}

const unsigned char* Bytes(std::span<const std::byte> data) {
  return reinterpret_cast<const unsigned char*>(data.data());
}

// libjpeg's JWRN_JPEG_EOF: the data ended before the image did. A warning to
// libjpeg (it fills the rest with grey), a damaged sample to a data loader,
// as PIL's "image file is truncated".
bool IsTruncation(const std::string& reason) { return reason.find("Premature end of JPEG file") != std::string::npos; }

uint8_t ClampByte(float v) { return static_cast<uint8_t>(std::clamp(v + 0.5f, 0.0f, 255.0f)); }

}  // namespace

TurboJpegHandle::TurboJpegHandle(Kind kind)
    : handle_(kind == Kind::kDecompress ? tjInitDecompress() : tjInitCompress()) {
  if (handle_ == nullptr) throw JpegError(std::string("cannot make a TurboJPEG handle: ") + tjGetErrorStr2(nullptr));
}

TurboJpegHandle::~TurboJpegHandle() {
  if (handle_ != nullptr) tjDestroy(handle_);
}

std::string TurboJpegHandle::LastError() const { return tjGetErrorStr2(handle_); }

bool TurboJpegHandle::LastWasWarning() const { return tjGetErrorCode(handle_) == TJERR_WARNING; }

namespace {

// The header of a JPEG, read with `tj`: a real size (not yet the pixel limit).
JpegHeader HeaderOf(const TurboJpegHandle& tj, std::span<const std::byte> jpeg) {
  if (jpeg.empty()) throw JpegError("not a JPEG: the file is empty");
  JpegHeader h;
  if (tjDecompressHeader3(tj.get(), Bytes(jpeg), static_cast<unsigned long>(jpeg.size()), &h.width, &h.height,
                          &h.subsampling, &h.colorspace) != 0) {
    throw JpegError("not a JPEG, or its header is damaged: " + tj.LastError());
  }
  if (h.width <= 0 || h.height <= 0) {
    throw JpegError("a JPEG of " + std::to_string(h.width) + " x " + std::to_string(h.height) + " pixels");
  }
  return h;
}

}  // namespace

JpegHeader ReadJpegHeader(std::span<const std::byte> jpeg) {
  return HeaderOf(TurboJpegHandle(TurboJpegHandle::Kind::kDecompress), jpeg);
}

CropWindow RandomResizedCropWindow(int width, int height, uint64_t seed, int64_t epoch, int64_t index) {
  // torchvision.transforms.RandomResizedCrop.get_params, scale (0.08, 1.0), ratio (3/4, 4/3).
  SplitMix rng(CropSeed(seed, epoch, index));
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(3.0 / 4.0), log_hi = std::log(4.0 / 3.0);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.Uniform(0.08, 1.0);
    const double aspect = std::exp(rng.Uniform(log_lo, log_hi));
    const int w = static_cast<int>(std::lround(std::sqrt(target_area * aspect)));
    const int h = static_cast<int>(std::lround(std::sqrt(target_area / aspect)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int y = static_cast<int>(rng.Below(height - h + 1));
      const int x = static_cast<int>(rng.Below(width - w + 1));
      return {x, y, w, h};
    }
  }
  // Fallback to a central crop of the whole image, its ratio clamped.
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < 3.0 / 4.0) {
    h = std::max(1, static_cast<int>(std::lround(w / (3.0 / 4.0))));
  } else if (in_ratio > 4.0 / 3.0) {
    w = std::max(1, static_cast<int>(std::lround(h * (4.0 / 3.0))));
  }
  h = std::min(h, height);
  w = std::min(w, width);
  return {(width - w) / 2, (height - h) / 2, w, h};
}

CropWindow CenterCropWindow(int width, int height) {
  const int side = std::max(1, static_cast<int>(std::lround(0.875 * std::min(width, height))));
  return {(width - side) / 2, (height - side) / 2, side, side};
}

CropWindow CropWindowFor(CropMode mode, int width, int height, uint64_t seed, int64_t epoch, int64_t index) {
  return mode == CropMode::kCenter ? CenterCropWindow(width, height)
                                   : RandomResizedCropWindow(width, height, seed, epoch, index);
}

JpegScale ChooseScale(int crop_width, int crop_height, int resize) {
  int count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&count);
  JpegScale best;  // 1/1
  if (factors == nullptr) return best;
  for (int i = 0; i < count; ++i) {
    const tjscalingfactor f = factors[i];
    if (f.num * 2 > f.denom) continue;  // only when the crop is at least twice the target
    if (TJSCALED(crop_width, f) < resize || TJSCALED(crop_height, f) < resize) continue;
    // Smaller is cheaper: compare f against best by cross-multiplication.
    if (f.num * best.denom < best.num * f.denom) best = {f.num, f.denom};
  }
  return best;
}

void ResizeBilinearRgb(const uint8_t* src, int src_width, int src_height, size_t src_stride, const CropBox& crop,
                       int out_size, uint8_t* out) {
  const double step_x = crop.width / out_size, step_y = crop.height / out_size;
  // Sample positions stay inside the crop (and the image), as a resize of the
  // cropped image would clamp at its edges.
  const double x_lo = std::max(0.0, crop.x), x_hi = std::min<double>(src_width - 1, crop.x + crop.width - 1);
  const double y_lo = std::max(0.0, crop.y), y_hi = std::min<double>(src_height - 1, crop.y + crop.height - 1);
  std::vector<int> x0(static_cast<size_t>(out_size)), x1(static_cast<size_t>(out_size));
  std::vector<float> wx(static_cast<size_t>(out_size));
  for (int ox = 0; ox < out_size; ++ox) {
    const double fx = std::clamp(crop.x + (ox + 0.5) * step_x - 0.5, x_lo, std::max(x_lo, x_hi));
    const int i0 = static_cast<int>(fx);
    x0[static_cast<size_t>(ox)] = i0 * 3;
    x1[static_cast<size_t>(ox)] = std::min(i0 + 1, src_width - 1) * 3;
    wx[static_cast<size_t>(ox)] = static_cast<float>(fx - i0);
  }
  for (int oy = 0; oy < out_size; ++oy) {
    const double fy = std::clamp(crop.y + (oy + 0.5) * step_y - 0.5, y_lo, std::max(y_lo, y_hi));
    const int j0 = static_cast<int>(fy);
    const int j1 = std::min(j0 + 1, src_height - 1);
    const float wy = static_cast<float>(fy - j0);
    const uint8_t* row0 = src + static_cast<size_t>(j0) * src_stride;
    const uint8_t* row1 = src + static_cast<size_t>(j1) * src_stride;
    uint8_t* dst = out + static_cast<size_t>(oy) * static_cast<size_t>(out_size) * 3;
    for (int ox = 0; ox < out_size; ++ox) {
      const size_t s = static_cast<size_t>(ox);
      const float w = wx[s];
      for (int c = 0; c < 3; ++c) {
        const float top = row0[x0[s] + c] + w * (row0[x1[s] + c] - row0[x0[s] + c]);
        const float bottom = row1[x0[s] + c] + w * (row1[x1[s] + c] - row1[x0[s] + c]);
        dst[s * 3 + static_cast<size_t>(c)] = ClampByte(top + wy * (bottom - top));
      }
    }
  }
}

namespace {

// The header of a JPEG, checked: a real size, under the pixel limit.
JpegHeader CheckedHeader(const TurboJpegHandle& tj, std::span<const std::byte> jpeg, int64_t max_pixels) {
  const JpegHeader h = HeaderOf(tj, jpeg);
  const int64_t pixels = static_cast<int64_t>(h.width) * h.height;
  if (pixels > max_pixels) {
    throw JpegError("a JPEG of " + std::to_string(h.width) + " x " + std::to_string(h.height) + " pixels, over the " +
                    std::to_string(max_pixels) + "-pixel limit (a decompression bomb, or a damaged header)");
  }
  return h;
}

// Decodes the whole image at `scale` into `rgb` (width x height x 3 of the
// scaled size). TJFLAG_LIMITSCANS: a progressive JPEG of thousands of scans
// (a known denial of service) is refused instead of decoded for minutes.
void DecompressRgb(const TurboJpegHandle& tj, std::span<const std::byte> jpeg, const JpegHeader& h, int width,
                   int height, uint8_t* rgb) {
  if (tjDecompress2(tj.get(), Bytes(jpeg), static_cast<unsigned long>(jpeg.size()), rgb, width, 0, height, TJPF_RGB,
                    TJFLAG_LIMITSCANS) != 0) {
    const std::string reason = tj.LastError();
    if (!tj.LastWasWarning() || IsTruncation(reason)) {
      throw JpegError("cannot decode (" + std::to_string(h.width) + " x " + std::to_string(h.height) +
                      "): " + reason);
    }
  }
}

void CheckSampleSpace(int resize, size_t out_size) {
  const size_t sample_bytes = static_cast<size_t>(resize) * static_cast<size_t>(resize) * 3;
  if (resize < 1 || out_size < sample_bytes) {
    throw std::length_error("a " + std::to_string(resize) + " x " + std::to_string(resize) +
                            " RGB sample needs " + std::to_string(sample_bytes) + " bytes, the slot has " +
                            std::to_string(out_size));
  }
}

// Skips PPM whitespace and # comments from `pos`.
void SkipPpmSpace(std::span<const std::byte> data, size_t* pos) {
  while (*pos < data.size()) {
    const char c = static_cast<char>(data[*pos]);
    if (c == '#') {
      while (*pos < data.size() && static_cast<char>(data[*pos]) != '\n') ++*pos;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++*pos;
    } else {
      return;
    }
  }
}

int ReadPpmNumber(std::span<const std::byte> data, size_t* pos) {
  SkipPpmSpace(data, pos);
  int64_t value = 0;
  const size_t start = *pos;
  while (*pos < data.size() && std::isdigit(static_cast<unsigned char>(data[*pos])) && *pos - start < 9) {
    value = value * 10 + (static_cast<char>(data[*pos]) - '0');
    ++*pos;
  }
  if (*pos == start) throw JpegError("a raw-pixel (PPM) sample with a damaged header");
  return static_cast<int>(value);
}

}  // namespace

bool IsPpm(std::span<const std::byte> data) {
  return data.size() >= 3 && static_cast<char>(data[0]) == 'P' && static_cast<char>(data[1]) == '6' &&
         std::isspace(static_cast<unsigned char>(data[2]));
}

PpmImage ParsePpm(std::span<const std::byte> data) {
  if (!IsPpm(data)) throw JpegError("not a raw-pixel (PPM P6) sample");
  size_t pos = 2;
  PpmImage image;
  image.width = ReadPpmNumber(data, &pos);
  image.height = ReadPpmNumber(data, &pos);
  const int maxval = ReadPpmNumber(data, &pos);
  if (maxval != 255 || pos >= data.size()) {
    throw JpegError("a raw-pixel (PPM) sample of maxval " + std::to_string(maxval) + ": only 8-bit RGB (255) is read");
  }
  ++pos;  // the one whitespace byte before the pixels
  const size_t need = static_cast<size_t>(image.width) * static_cast<size_t>(image.height) * 3;
  if (image.width <= 0 || image.height <= 0 || data.size() - pos != need) {
    throw JpegError("a raw-pixel (PPM) sample of " + std::to_string(image.width) + " x " +
                    std::to_string(image.height) + " holds " + std::to_string(data.size() - pos) +
                    " bytes of pixels, not " + std::to_string(need) + " (truncated or damaged)");
  }
  image.rgb = reinterpret_cast<const uint8_t*>(data.data()) + pos;
  return image;
}

std::vector<std::byte> DecodeToPpm(std::span<const std::byte> jpeg, int64_t max_pixels) {
  const TurboJpegHandle tj(TurboJpegHandle::Kind::kDecompress);
  const JpegHeader h = CheckedHeader(tj, jpeg, max_pixels);
  const std::string header = "P6\n" + std::to_string(h.width) + " " + std::to_string(h.height) + "\n255\n";
  std::vector<std::byte> out(header.size() + static_cast<size_t>(h.width) * static_cast<size_t>(h.height) * 3);
  std::memcpy(out.data(), header.data(), header.size());
  DecompressRgb(tj, jpeg, h, h.width, h.height, reinterpret_cast<uint8_t*>(out.data() + header.size()));
  return out;
}

JpegDecodeInfo DecodeCropResize(std::span<const std::byte> jpeg, int64_t index, const JpegDecodeOptions& options,
                                std::span<std::byte> out) {
  CheckSampleSpace(options.resize, out.size());
  JpegDecodeInfo info;
  JpegHeader& h = info.header;
  if (IsPpm(jpeg)) {
    // Raw pixels (`convert --pixels`): the same crop and resize, no decode.
    const PpmImage image = ParsePpm(jpeg);
    h.width = image.width;
    h.height = image.height;
    info.crop = CropWindowFor(options.crop, h.width, h.height, options.seed, options.epoch, index);
    info.decoded_width = h.width;
    info.decoded_height = h.height;
    const CropBox box{static_cast<double>(info.crop.x), static_cast<double>(info.crop.y),
                      static_cast<double>(info.crop.width), static_cast<double>(info.crop.height)};
    ResizeBilinearRgb(image.rgb, h.width, h.height, static_cast<size_t>(h.width) * 3, box, options.resize,
                      reinterpret_cast<uint8_t*>(out.data()));
    return info;
  }
  const TurboJpegHandle tj(TurboJpegHandle::Kind::kDecompress);
  h = CheckedHeader(tj, jpeg, options.max_pixels);
  info.crop = CropWindowFor(options.crop, h.width, h.height, options.seed, options.epoch, index);
  info.scale = ChooseScale(info.crop.width, info.crop.height, options.resize);
  const tjscalingfactor factor{info.scale.num, info.scale.denom};
  info.decoded_width = TJSCALED(h.width, factor);
  info.decoded_height = TJSCALED(h.height, factor);
  std::vector<uint8_t> rgb(static_cast<size_t>(info.decoded_width) * static_cast<size_t>(info.decoded_height) * 3);
  DecompressRgb(tj, jpeg, h, info.decoded_width, info.decoded_height, rgb.data());
  const double sx = static_cast<double>(info.decoded_width) / h.width;
  const double sy = static_cast<double>(info.decoded_height) / h.height;
  const CropBox box{info.crop.x * sx, info.crop.y * sy, info.crop.width * sx, info.crop.height * sy};
  ResizeBilinearRgb(rgb.data(), info.decoded_width, info.decoded_height, static_cast<size_t>(info.decoded_width) * 3,
                    box, options.resize, reinterpret_cast<uint8_t*>(out.data()));
  return info;
}

namespace {
// The extension of the last part of `path`, lower case; empty when none.
std::string LowerExtension(std::string_view path) {
  const size_t dot = path.rfind('.');
  if (dot == std::string_view::npos || path.find('/', dot) != std::string_view::npos) return {};
  std::string ext(path.substr(dot + 1));
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext;
}
}  // namespace

bool HasJpegExtension(std::string_view path) {
  const std::string ext = LowerExtension(path);
  return ext == "jpg" || ext == "jpeg" || ext == "jpe";
}

bool HasPpmExtension(std::string_view path) { return LowerExtension(path) == "ppm"; }

void SynthesizeImage(uint64_t seed, int64_t index, int width, int height, std::span<uint8_t> rgb) {
  const size_t need = static_cast<size_t>(width) * static_cast<size_t>(height) * 3;
  if (rgb.size() < need) throw std::length_error("SynthesizeImage: buffer too small");
  SplitMix rng(Mix(Mix(seed, 0x696d616765 /* "image" */), static_cast<uint64_t>(index)));
  const auto colour = [&](float* c) {
    for (int k = 0; k < 3; ++k) c[k] = static_cast<float>(rng.Uniform(20, 235));
  };
  // Background: a two-colour gradient along a random direction, with a
  // low-frequency shading wave (light falling over a scene).
  float c0[3], c1[3];
  colour(c0);
  colour(c1);
  const double angle = rng.Uniform(0, 2 * std::numbers::pi);
  const float dir_x = static_cast<float>(std::cos(angle)), dir_y = static_cast<float>(std::sin(angle));
  const float span = std::abs(dir_x) * width + std::abs(dir_y) * height;
  const float wave_fx = static_cast<float>(rng.Uniform(0.005, 0.03)), wave_fy = static_cast<float>(rng.Uniform(0.005, 0.03));
  const float wave_phase = static_cast<float>(rng.Uniform(0, 6.28)), wave_amp = static_cast<float>(rng.Uniform(10, 30));

  struct Shape {
    bool ellipse;
    float cx, cy, a, b, cos_r, sin_r, soft;
    float colour[3], shade;  // shade: brightness change across the shape
    float tex_freq, tex_amp;  // fine stripes: fabric, bark, grass
  };
  const int shape_count = 5 + static_cast<int>(rng.Below(6));
  std::vector<Shape> shapes(static_cast<size_t>(shape_count));
  const float min_side = static_cast<float>(std::min(width, height));
  for (Shape& s : shapes) {
    s.ellipse = rng.Below(2) == 0;
    s.cx = static_cast<float>(rng.Uniform(0, width));
    s.cy = static_cast<float>(rng.Uniform(0, height));
    s.a = static_cast<float>(rng.Uniform(0.08, 0.4)) * min_side;
    s.b = static_cast<float>(rng.Uniform(0.08, 0.4)) * min_side;
    const double r = rng.Uniform(0, std::numbers::pi);
    s.cos_r = static_cast<float>(std::cos(r));
    s.sin_r = static_cast<float>(std::sin(r));
    s.soft = static_cast<float>(rng.Uniform(0.7, 4.0));
    colour(s.colour);
    s.shade = static_cast<float>(rng.Uniform(-40, 40));
    s.tex_freq = static_cast<float>(rng.Uniform(0.3, 1.6));
    s.tex_amp = static_cast<float>(rng.Uniform(3, 14));
  }
  // Mid-frequency detail (foliage, gravel, skin pores): value noise on a grid
  // of 2-pixel cells, interpolated bilinearly.
  constexpr int kCell = 2;
  const int grid_w = width / kCell + 2, grid_h = height / kCell + 2;
  std::vector<float> grid(static_cast<size_t>(grid_w) * static_cast<size_t>(grid_h));
  for (float& g : grid) g = static_cast<float>(rng.Uniform(-1, 1));
  const float detail_amp = 34.0f;
  const float noise_sigma = 15.0f;
  uint8_t* px = rgb.data();
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x, px += 3) {
      const float fx = static_cast<float>(x), fy = static_cast<float>(y);
      float t = ((fx - (dir_x < 0 ? width : 0)) * dir_x + (fy - (dir_y < 0 ? height : 0)) * dir_y) / span;
      t = std::clamp(t, 0.0f, 1.0f);
      const float light = wave_amp * std::sin(wave_fx * fx + wave_fy * fy + wave_phase);
      float c[3];
      for (int k = 0; k < 3; ++k) c[k] = c0[k] + t * (c1[k] - c0[k]) + light;
      for (const Shape& s : shapes) {
        const float dx = fx - s.cx, dy = fy - s.cy;
        const float u = dx * s.cos_r + dy * s.sin_r, v = -dx * s.sin_r + dy * s.cos_r;
        float outside;  // signed distance to the edge, pixels (negative inside)
        if (s.ellipse) {
          const float d = std::sqrt((u / s.a) * (u / s.a) + (v / s.b) * (v / s.b));
          outside = (d - 1) * std::min(s.a, s.b);
        } else {
          outside = std::max(std::abs(u) - s.a, std::abs(v) - s.b);
        }
        if (outside > 2 * s.soft) continue;
        const float alpha = std::clamp(0.5f - outside / (2 * s.soft), 0.0f, 1.0f);
        const float inner = s.shade * (u / s.a) + s.tex_amp * std::sin(s.tex_freq * v);
        for (int k = 0; k < 3; ++k) c[k] += alpha * (s.colour[k] + inner - c[k]);
      }
      const int gx = x / kCell, gy = y / kCell;
      const float tx = static_cast<float>(x % kCell) / kCell, ty = static_cast<float>(y % kCell) / kCell;
      const float* g0 = &grid[static_cast<size_t>(gy) * static_cast<size_t>(grid_w) + static_cast<size_t>(gx)];
      const float* g1 = g0 + grid_w;
      const float detail = detail_amp * ((g0[0] + tx * (g0[1] - g0[0])) * (1 - ty) + (g1[0] + tx * (g1[1] - g1[0])) * ty);
      for (float& v : c) v += detail;
      // Sensor noise: mostly luminance, a little chroma (sums of uniforms, near Gaussian).
      const uint64_t r = rng.Next();
      const float luma = (static_cast<float>((r & 0xff) + ((r >> 8) & 0xff) + ((r >> 16) & 0xff) +
                                             ((r >> 24) & 0xff)) - 510.0f) * (noise_sigma / 147.8f);
      for (int k = 0; k < 3; ++k) {
        const float chroma = (static_cast<float>((r >> (32 + 8 * k)) & 0xff) - 127.5f) * 0.02f;
        px[k] = ClampByte(c[k] + luma + chroma);
      }
    }
  }
}

std::vector<std::byte> EncodeJpeg(std::span<const uint8_t> rgb, int width, int height, int quality) {
  const TurboJpegHandle tj(TurboJpegHandle::Kind::kCompress);
  std::vector<std::byte> out(tjBufSize(width, height, TJSAMP_420));
  unsigned char* buffer = reinterpret_cast<unsigned char*>(out.data());
  unsigned long size = static_cast<unsigned long>(out.size());
  if (tjCompress2(tj.get(), rgb.data(), width, 0, height, TJPF_RGB, &buffer, &size, TJSAMP_420, quality,
                  TJFLAG_NOREALLOC) != 0) {
    throw JpegError("cannot encode a " + std::to_string(width) + " x " + std::to_string(height) +
                    " JPEG: " + tj.LastError());
  }
  out.resize(size);
  return out;
}

}  // namespace feedtune::workloads

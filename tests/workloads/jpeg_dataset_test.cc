// JPEG samples (kind files, decode: jpeg): the decoded, cropped and resized
// image matches a reference (a full-size tjDecompress2 of the same file, the
// crop and a plain bilinear resize written here) within the codec's
// tolerance; crops are deterministic in (seed, epoch, index) and follow
// torchvision's RandomResizedCrop bounds; DCT scaling is chosen only when the
// crop is at least twice the target; hostile files fail the read with the
// file named, and a directory without JPEGs is refused at open (and at
// config time, exit 2); gen-data --layout jpeg writes realistic sizes, and a
// trial runs over them through the binary.
#include <gtest/gtest.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "loader/data_loader.h"
#include "loader/fork_server.h"
#include "tests/common/run_feedtune.h"
#include "workloads/files_dataset.h"
#include "workloads/format_inspect.h"
#include "workloads/jpeg_image.h"
#include "workloads/shard_format.h"

namespace feedtune::workloads {
namespace {

namespace fs = std::filesystem;

SyntheticOptions JpegNoCost(uint64_t seed = 0) {
  SyntheticOptions cost;
  cost.cpu_us_per_sample = 0;
  cost.jitter = 0;
  cost.seed = seed;
  return cost;
}

std::vector<uint8_t> Image(int64_t index, int width, int height) {
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * static_cast<size_t>(height) * 3);
  SynthesizeImage(3, index, width, height, rgb);
  return rgb;
}

std::vector<std::byte> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(bytes.size());
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

// The reference: the whole image decoded at full size by TurboJPEG.
std::vector<uint8_t> FullDecode(std::span<const std::byte> jpeg, int* width, int* height) {
  tjhandle tj = tjInitDecompress();
  int subsamp = 0, colorspace = 0;
  EXPECT_EQ(tjDecompressHeader3(tj, reinterpret_cast<const unsigned char*>(jpeg.data()), jpeg.size(), width, height,
                                &subsamp, &colorspace),
            0);
  std::vector<uint8_t> rgb(static_cast<size_t>(*width) * static_cast<size_t>(*height) * 3);
  EXPECT_EQ(tjDecompress2(tj, reinterpret_cast<const unsigned char*>(jpeg.data()), jpeg.size(), rgb.data(), *width, 0,
                          *height, TJPF_RGB, 0),
            0);
  tjDestroy(tj);
  return rgb;
}

// The reference resize, written independently of ResizeBilinearRgb: crop the
// integer window out, then sample each output pixel's centre bilinearly in
// the cropped image, in doubles, clamped at its edges.
std::vector<uint8_t> ReferenceCropResize(const std::vector<uint8_t>& rgb, int width, const CropWindow& crop, int n) {
  std::vector<uint8_t> out(static_cast<size_t>(n) * static_cast<size_t>(n) * 3);
  const auto at = [&](int x, int y, int c) {
    x = std::clamp(x, 0, crop.width - 1);
    y = std::clamp(y, 0, crop.height - 1);
    return static_cast<double>(rgb[(static_cast<size_t>(crop.y + y) * static_cast<size_t>(width) +
                                    static_cast<size_t>(crop.x + x)) * 3 + static_cast<size_t>(c)]);
  };
  for (int oy = 0; oy < n; ++oy) {
    for (int ox = 0; ox < n; ++ox) {
      const double fx = std::clamp((ox + 0.5) * crop.width / n - 0.5, 0.0, crop.width - 1.0);
      const double fy = std::clamp((oy + 0.5) * crop.height / n - 0.5, 0.0, crop.height - 1.0);
      const int x0 = static_cast<int>(std::floor(fx)), y0 = static_cast<int>(std::floor(fy));
      const double wx = fx - x0, wy = fy - y0;
      for (int c = 0; c < 3; ++c) {
        const double v = (1 - wy) * ((1 - wx) * at(x0, y0, c) + wx * at(x0 + 1, y0, c)) +
                         wy * ((1 - wx) * at(x0, y0 + 1, c) + wx * at(x0 + 1, y0 + 1, c));
        out[(static_cast<size_t>(oy) * static_cast<size_t>(n) + static_cast<size_t>(ox)) * 3 +
            static_cast<size_t>(c)] = static_cast<uint8_t>(std::lround(std::clamp(v, 0.0, 255.0)));
      }
    }
  }
  return out;
}

// A box-filter reduction by `factor` (what DCT scaling approximates).
std::vector<uint8_t> BoxReduce(const std::vector<uint8_t>& rgb, int width, int height, int factor, int* out_w,
                               int* out_h) {
  *out_w = width / factor;
  *out_h = height / factor;
  std::vector<uint8_t> out(static_cast<size_t>(*out_w) * static_cast<size_t>(*out_h) * 3);
  for (int y = 0; y < *out_h; ++y) {
    for (int x = 0; x < *out_w; ++x) {
      for (int c = 0; c < 3; ++c) {
        double sum = 0;
        for (int dy = 0; dy < factor; ++dy) {
          for (int dx = 0; dx < factor; ++dx) {
            sum += rgb[(static_cast<size_t>(y * factor + dy) * static_cast<size_t>(width) +
                        static_cast<size_t>(x * factor + dx)) * 3 + static_cast<size_t>(c)];
          }
        }
        out[(static_cast<size_t>(y) * static_cast<size_t>(*out_w) + static_cast<size_t>(x)) * 3 +
            static_cast<size_t>(c)] = static_cast<uint8_t>(std::lround(sum / (factor * factor)));
      }
    }
  }
  return out;
}

struct Diff {
  double mean = 0;
  int max = 0;
};
Diff Compare(std::span<const std::byte> got, const std::vector<uint8_t>& want) {
  Diff d;
  double sum = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const int delta = std::abs(static_cast<int>(std::to_integer<uint8_t>(got[i])) - static_cast<int>(want[i]));
    sum += delta;
    d.max = std::max(d.max, delta);
  }
  d.mean = sum / static_cast<double>(want.size());
  return d;
}

class JpegDatasetTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("feedtune-jpeg-" + std::to_string(getpid()) + "-" +
                                         testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string WriteFile(const std::string& name, std::span<const std::byte> bytes) {
    const fs::path path = dir_ / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                static_cast<std::streamsize>(bytes.size()));
    return path.string();
  }
  std::string WriteJpeg(const std::string& name, int64_t index, int width, int height, int quality = 90) {
    return WriteFile(name, EncodeJpeg(Image(index, width, height), width, height, quality));
  }
  FilesOptions Options(const std::string& path, CropMode crop = CropMode::kRandom, int64_t resize = 224) {
    FilesOptions o;
    o.path = path;
    o.layout = FilesLayout::kFiles;
    o.decode = FilesDecode::kJpeg;
    o.crop = crop;
    o.resize = resize;
    return o;
  }

  fs::path dir_;
};

TEST(JpegCrop, RandomWindowsAreDeterministicAndWithinTorchvisionBounds) {
  std::set<std::tuple<int, int, int, int>> distinct;
  for (int64_t index = 0; index < 200; ++index) {
    const CropWindow w = RandomResizedCropWindow(500, 375, 1, 0, index);
    EXPECT_EQ(w, RandomResizedCropWindow(500, 375, 1, 0, index));  // same (seed, epoch, index): same window
    distinct.insert({w.x, w.y, w.width, w.height});
    ASSERT_GE(w.x, 0);
    ASSERT_GE(w.y, 0);
    ASSERT_LE(w.x + w.width, 500);
    ASSERT_LE(w.y + w.height, 375);
    const double area = static_cast<double>(w.width) * w.height / (500.0 * 375.0);
    EXPECT_GE(area, 0.08 * 0.95) << index;  // rounding of the sides
    const double ratio = static_cast<double>(w.width) / w.height;
    EXPECT_GE(ratio, 0.75 * 0.97) << index;
    EXPECT_LE(ratio, 4.0 / 3.0 * 1.03) << index;
  }
  EXPECT_GT(distinct.size(), 190u);
  // Another epoch, seed or index draws another window (almost always).
  int differ_epoch = 0, differ_seed = 0;
  for (int64_t index = 0; index < 50; ++index) {
    differ_epoch += !(RandomResizedCropWindow(500, 375, 1, 0, index) == RandomResizedCropWindow(500, 375, 1, 1, index));
    differ_seed += !(RandomResizedCropWindow(500, 375, 1, 0, index) == RandomResizedCropWindow(500, 375, 2, 0, index));
  }
  EXPECT_GE(differ_epoch, 48);
  EXPECT_GE(differ_seed, 48);
  // Pinned values: windows do not change across builds and platforms (the
  // generator is our own, not std::uniform_real_distribution).
  EXPECT_EQ(RandomResizedCropWindow(500, 375, 1, 0, 0), (CropWindow{1, 12, 335, 354}));
  EXPECT_EQ(RandomResizedCropWindow(500, 375, 1, 3, 17), (CropWindow{79, 73, 250, 264}));
  // A sliver of an image: no random window fits in 10 tries, so the fallback
  // is the whole image, ratio clamped to 4/3, centred.
  const CropWindow sliver = RandomResizedCropWindow(1000, 10, 5, 0, 3);
  EXPECT_EQ(sliver.height, 10);
  EXPECT_LE(sliver.width, 14);
  EXPECT_EQ(CenterCropWindow(500, 375), (CropWindow{86, 23, 328, 328}));
}

TEST(JpegCrop, DctScalingOnlyWhenTheCropIsAtLeastTwiceTheTarget) {
  EXPECT_EQ(ChooseScale(440, 1000, 224), (JpegScale{1, 1}));  // 440 < 2 x 224
  EXPECT_EQ(ChooseScale(448, 448, 224), (JpegScale{1, 2}));
  EXPECT_EQ(ChooseScale(1000, 900, 224), (JpegScale{1, 4}));  // 1/4: 250 x 225; 1/8 would be 125 x 113
  EXPECT_EQ(ChooseScale(700, 700, 224), (JpegScale{3, 8}));   // 263; 1/4 would be 175
  EXPECT_EQ(ChooseScale(4000, 3000, 224), (JpegScale{1, 8}));
}

TEST_F(JpegDatasetTest, SolidColourCentreCropKeepsItsColour) {
  std::vector<uint8_t> solid(640 * 480 * 3);
  for (size_t i = 0; i < solid.size(); i += 3) {
    solid[i] = 200;
    solid[i + 1] = 60;
    solid[i + 2] = 30;
  }
  const std::vector<std::byte> jpeg = EncodeJpeg(solid, 640, 480, 95);
  JpegDecodeOptions options;
  options.crop = CropMode::kCenter;
  options.resize = 100;
  std::vector<std::byte> out(100 * 100 * 3);
  const JpegDecodeInfo info = DecodeCropResize(jpeg, 0, options, out);
  EXPECT_EQ(info.header.width, 640);
  EXPECT_EQ(info.header.height, 480);
  EXPECT_EQ(info.crop, (CropWindow{110, 30, 420, 420}));
  EXPECT_EQ(info.scale, (JpegScale{1, 4}));  // 420 / 4 = 105 >= 100
  double mean[3] = {0, 0, 0};
  for (size_t i = 0; i < out.size(); ++i) mean[i % 3] += std::to_integer<int>(out[i]);
  const double want[3] = {200, 60, 30};
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(mean[c] / (100 * 100), want[c], 3) << "channel " << c;
}

// No DCT scaling (the crop is under twice the target): the same decode, the
// same window, the same bilinear weights: within one level of rounding.
TEST_F(JpegDatasetTest, MatchesAFullDecodeAndAReferenceResize) {
  const std::vector<std::byte> jpeg = EncodeJpeg(Image(4, 500, 375), 500, 375, 90);
  int width = 0, height = 0;
  const std::vector<uint8_t> full = FullDecode(jpeg, &width, &height);
  std::vector<std::byte> out(224 * 224 * 3);
  int compared = 0;
  for (int64_t index = 0; index < 20; ++index) {
    JpegDecodeOptions options;
    options.seed = 9;
    const JpegDecodeInfo info = DecodeCropResize(jpeg, index, options, out);
    if (!(info.scale == JpegScale{1, 1})) continue;
    ASSERT_EQ(info.crop, RandomResizedCropWindow(500, 375, 9, 0, index));
    const Diff d = Compare(out, ReferenceCropResize(full, width, info.crop, 224));
    EXPECT_LE(d.max, 1) << "sample " << index;
    ++compared;
    // The test can fail: another sample's window is far off.
    if (index == 0) {
      const CropWindow other = RandomResizedCropWindow(500, 375, 9, 0, 1);
      EXPECT_GT(Compare(out, ReferenceCropResize(full, width, other, 224)).mean, 5.0);
    }
  }
  EXPECT_GE(compared, 15);
}

// With DCT scaling: against a full decode reduced by a box filter of the same
// factor, then the reference resize: within a few levels on average (the
// scaled IDCT is not exactly a box filter, and chroma is upsampled at
// another resolution).
TEST_F(JpegDatasetTest, DctScaledDecodeIsWithinTheCodecsTolerance) {
  const std::vector<std::byte> jpeg = EncodeJpeg(Image(5, 1600, 1200), 1600, 1200, 90);
  int width = 0, height = 0;
  const std::vector<uint8_t> full = FullDecode(jpeg, &width, &height);
  JpegDecodeOptions options;
  options.crop = CropMode::kCenter;
  std::vector<std::byte> out(224 * 224 * 3);
  const JpegDecodeInfo info = DecodeCropResize(jpeg, 0, options, out);
  ASSERT_EQ(info.crop, (CropWindow{275, 75, 1050, 1050}));
  ASSERT_EQ(info.scale, (JpegScale{1, 4}));
  ASSERT_EQ(info.decoded_width, 400);
  int rw = 0, rh = 0;
  const std::vector<uint8_t> reduced = BoxReduce(full, width, height, 4, &rw, &rh);
  // 1050 / 4 is not whole: the reference window is the nearest whole one.
  const CropWindow scaled{69, 19, 262, 262};
  const Diff d = Compare(out, ReferenceCropResize(reduced, rw, scaled, 224));
  EXPECT_LT(d.mean, 4.0) << "max " << d.max;
  // A point-sampled full-size reference (no reduction) is further away:
  // the noise is averaged away by the scaled decode.
  const Diff point = Compare(out, ReferenceCropResize(full, width, info.crop, 224));
  EXPECT_GT(point.mean, d.mean);
}

TEST_F(JpegDatasetTest, DatasetReadsEachJpegOnceDecodedWithPreadAndMmap) {
  const fs::path data = dir_ / "data";
  for (int i = 0; i < 6; ++i) WriteJpeg("data/" + std::to_string(i) + (i == 3 ? ".JPEG" : ".jpg"), i, 300 + i, 200);
  WriteFile("data/labels.txt", std::as_bytes(std::span("not an image", 12)));
  FilesOptions options = Options(data.string(), CropMode::kRandom, 64);
  const FilesDataset pread(options, JpegNoCost(11), CpuCalibration{});
  options.io = FilesIo::kMmap;
  const FilesDataset mmap(options, JpegNoCost(11), CpuCalibration{});
  EXPECT_EQ(pread.size(), 6);
  EXPECT_EQ(pread.skipped_files(), 1);
  EXPECT_EQ(pread.max_sample_bytes(), 64 * 64 * 3);
  EXPECT_NE(pread.Describe().find("decoded as JPEG (libjpeg-turbo), crop random, resized to 64x64 RGB"),
            std::string::npos)
      << pread.Describe();
  std::vector<std::byte> a(64 * 64 * 3), b(64 * 64 * 3), want(64 * 64 * 3);
  for (int64_t i = 0; i < 6; ++i) {
    ASSERT_EQ(pread.Read(i, a), 64 * 64 * 3);
    ASSERT_EQ(mmap.Read(i, b), 64 * 64 * 3);
    EXPECT_EQ(a, b) << i;
    // Sample i is the i-th JPEG by path, decoded with the workload's seed.
    const std::string name = std::to_string(i) + (i == 3 ? ".JPEG" : ".jpg");
    JpegDecodeOptions decode;
    decode.resize = 64;
    decode.seed = 11;
    DecodeCropResize(ReadBytes((data / name).string()), i, decode, want);
    EXPECT_EQ(a, want) << i;
  }
}

TEST_F(JpegDatasetTest, WorkerProcessesDecodeEverySample) {
  for (int i = 0; i < 24; ++i) WriteJpeg("w/" + std::to_string(100 + i) + ".jpg", i, 160, 120);
  const auto dataset = std::make_shared<FilesDataset>(Options((dir_ / "w").string(), CropMode::kCenter, 32),
                                                      JpegNoCost(), CpuCalibration{});
  auto server = std::make_shared<loader::ForkServer>(dataset);
  loader::LoaderOptions options;
  options.knobs.batch_size = 5;
  options.knobs.num_workers = 3;
  options.drop_last = false;
  loader::DataLoader data_loader(dataset, options, nullptr, server);
  data_loader.StartEpoch(0);
  std::vector<std::byte> want(32 * 32 * 3);
  int seen = 0;
  while (auto batch = data_loader.Next()) {
    for (size_t i = 0; i < batch->sample_indices.size(); ++i) {
      dataset->Read(batch->sample_indices[i], want);
      ASSERT_TRUE(std::equal(want.begin(), want.end(), batch->data.data() + static_cast<int64_t>(i) * batch->stride));
      ++seen;
    }
  }
  EXPECT_EQ(seen, 24);
}

// The loader tells the dataset the epoch (Dataset::SetEpoch) before it
// dispatches the epoch's batches; forked workers see it through the dataset's
// shared page. So a random crop changes every epoch, as torchvision's does,
// and is the same for the same (seed, epoch, index) in any worker.
TEST_F(JpegDatasetTest, RandomCropsDifferPerEpochAndRepeatForTheSameEpoch) {
  for (int i = 0; i < 24; ++i) WriteJpeg("e/" + std::to_string(100 + i) + ".jpg", i, 160, 120);
  const auto dataset = std::make_shared<FilesDataset>(Options((dir_ / "e").string(), CropMode::kRandom, 32),
                                                      JpegNoCost(5), CpuCalibration{});
  auto server = std::make_shared<loader::ForkServer>(dataset);
  loader::LoaderOptions options;
  options.knobs.batch_size = 4;
  options.knobs.num_workers = 2;
  options.knobs.persistent_workers = true;  // the same worker processes across the epochs
  options.drop_last = false;
  loader::DataLoader data_loader(dataset, options, nullptr, server);
  const auto read_epoch = [&](int64_t epoch) {
    std::vector<std::vector<std::byte>> samples(24);
    data_loader.StartEpoch(epoch);
    while (auto batch = data_loader.Next()) {
      for (size_t i = 0; i < batch->sample_indices.size(); ++i) {
        const std::byte* at = batch->data.data() + static_cast<int64_t>(i) * batch->stride;
        samples[static_cast<size_t>(batch->sample_indices[i])].assign(at, at + 32 * 32 * 3);
      }
    }
    return samples;
  };
  const auto epoch0 = read_epoch(0);
  const auto epoch1 = read_epoch(1);
  const auto epoch0_again = read_epoch(0);
  int differ = 0;
  std::vector<std::byte> want(32 * 32 * 3);
  for (int64_t i = 0; i < 24; ++i) {
    const auto& s0 = epoch0[static_cast<size_t>(i)];
    const auto& s1 = epoch1[static_cast<size_t>(i)];
    ASSERT_EQ(s0.size(), want.size()) << i;
    ASSERT_EQ(s1.size(), want.size()) << i;
    differ += s0 != s1;
    EXPECT_EQ(s0, epoch0_again[static_cast<size_t>(i)]) << "sample " << i << ": epoch 0 read twice";
    // Each is exactly the decode of (seed 5, its epoch, its index).
    const auto jpeg = ReadBytes((dir_ / "e" / (std::to_string(100 + i) + ".jpg")).string());
    JpegDecodeOptions decode;
    decode.resize = 32;
    decode.seed = 5;
    for (int64_t epoch : {0, 1}) {
      decode.epoch = epoch;
      DecodeCropResize(jpeg, i, decode, want);
      EXPECT_EQ(epoch == 0 ? s0 : s1, want) << "sample " << i << ", epoch " << epoch;
    }
  }
  EXPECT_GE(differ, 20) << "of 24 samples, a new crop in epoch 1";
}

TEST_F(JpegDatasetTest, HostileJpegsFailTheReadWithTheFileNamed) {
  const std::vector<std::byte> good = EncodeJpeg(Image(1, 320, 240), 320, 240, 90);
  WriteFile("h/0-good.jpg", good);
  WriteFile("h/1-truncated.jpg", std::span(good).first(good.size() / 2));
  std::vector<std::byte> garbage(good.begin(), good.end());
  for (size_t i = 700; i < garbage.size(); i += 7) garbage[i] = std::byte{0xFF};
  WriteFile("h/2-garbage.jpg", garbage);
  WriteFile("h/3-text.jpg", std::as_bytes(std::span("hello, not a jpeg", 17)));
  WriteFile("h/4-empty.jpg", {});
  // A header announcing 60000 x 60000 pixels: refused before any allocation.
  std::vector<std::byte> bomb = EncodeJpeg(Image(2, 16, 16), 16, 16, 90);
  for (size_t i = 0; i + 8 < bomb.size(); ++i) {
    if (bomb[i] == std::byte{0xFF} && bomb[i + 1] == std::byte{0xC0}) {  // SOF0: length(2) precision(1) h(2) w(2)
      bomb[i + 5] = std::byte{0xEA};
      bomb[i + 6] = std::byte{0x60};
      bomb[i + 7] = std::byte{0xEA};
      bomb[i + 8] = std::byte{0x60};
      break;
    }
  }
  WriteFile("h/5-bomb.jpg", bomb);
  const FilesDataset dataset(Options((dir_ / "h").string()), JpegNoCost(), CpuCalibration{});
  ASSERT_EQ(dataset.size(), 6);
  std::vector<std::byte> out(224 * 224 * 3);
  EXPECT_EQ(dataset.Read(0, out), 224 * 224 * 3);
  const char* expected[] = {nullptr, "Premature end of JPEG file", "", "not a JPEG", "not a JPEG: the file is empty",
                            "over the 179000000-pixel limit"};
  for (int64_t i = 1; i < 6; ++i) {
    try {
      dataset.Read(i, out);
      // Some damage decodes (libjpeg recovers); then it must not be the truncated or text file.
      EXPECT_EQ(i, 2) << "sample " << i << " decoded";
    } catch (const DatasetCorrupt& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find((dir_ / "h").string() + "/" + std::to_string(i) + "-"), std::string::npos) << what;
      EXPECT_NE(what.find("(sample " + std::to_string(i) + ")"), std::string::npos) << what;
      EXPECT_NE(what.find(expected[i]), std::string::npos) << what;
    }
  }
}

TEST_F(JpegDatasetTest, DirectoryWithoutJpegsIsRefused) {
  WriteFile("none/a.png", std::as_bytes(std::span("png", 3)));
  WriteFile("none/sub/b.txt", std::as_bytes(std::span("txt", 3)));
  try {
    FilesDataset dataset(Options((dir_ / "none").string()), JpegNoCost(), CpuCalibration{});
    FAIL() << "opened";
  } catch (const DatasetNotFound& e) {
    EXPECT_NE(std::string(e.what()).find("no JPEG images under it"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2 other files skipped"), std::string::npos) << e.what();
  }
  FilesOptions shards = Options((dir_ / "none").string());
  shards.layout = FilesLayout::kShards;
  EXPECT_THROW(FilesDataset(shards, JpegNoCost(), CpuCalibration{}), DatasetNotFound);
}

TEST_F(JpegDatasetTest, GenDataTrialAndConfigErrorsThroughTheBinary) {
  using testing_util::RunFeedtune;
  const std::string data = (dir_ / "jpeg").string();
  auto r = RunFeedtune("gen-data --layout jpeg --out " + data + " --samples 30", dir_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("gen-data: about "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("gen-data: 30/30 samples (100%)"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("wrote 30 JPEG images of 500x375 at quality 90"), std::string::npos) << r.out;
  // Realistic sizes: near 100 KB, not 5 KB.
  int64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(data)) {
    if (e.is_regular_file()) {
      EXPECT_EQ(e.path().extension(), ".jpg");
      total += static_cast<int64_t>(e.file_size());
    }
  }
  EXPECT_GT(total / 30, 80'000);
  EXPECT_LT(total / 30, 130'000);
  const FilesDataset opened(Options(data), JpegNoCost(), CpuCalibration{});
  EXPECT_EQ(opened.size(), 30);
  int width = 0, height = 0;
  FullDecode(ReadBytes(data + "/00000/000000007.jpg"), &width, &height);
  EXPECT_EQ(width, 500);
  EXPECT_EQ(height, 375);

  const auto config = [&](const std::string& name, const std::string& workload) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << "name: j\nworkload:\n" << workload
                        << "loader: {batch_size: 8}\ndevice: {backend: host-sim, step_us: 50}\n"
                           "sweep: {measure_seconds: 0.2, warmup_batches: 1}\n";
    return path;
  };
  r = RunFeedtune("trial " +
                      config("ok.yaml", "  kind: files\n  layout: files\n  path: " + data +
                                            "\n  decode: jpeg\n  crop: center\n  resize: 160\n  cpu_us_per_sample: 0\n") +
                      " --set loader.num_workers=2",
                  dir_);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("samples/s"), std::string::npos) << r.out;

  // A corrupt JPEG: a failed trial that names the file, not a crash.
  const std::string bad_dir = (dir_ / "bad").string();
  fs::create_directories(bad_dir + "/x");
  for (int i = 0; i < 20; ++i) {
    fs::copy_file(data + "/00000/000000001.jpg", bad_dir + "/x/a" + std::to_string(10 + i) + ".jpg");
  }
  {
    std::vector<std::byte> half = ReadBytes(data + "/00000/000000002.jpg");
    half.resize(half.size() / 3);
    WriteFile("bad/x/b.jpg", half);
  }
  r = RunFeedtune("trial " + config("bad.yaml", "  kind: files\n  layout: files\n  path: " + bad_dir +
                                                    "\n  decode: jpeg\n  cpu_us_per_sample: 0\n"),
                  dir_);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find(bad_dir + "/x/b.jpg (sample 20)"), std::string::npos) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("Premature end of JPEG file"), std::string::npos) << r.out << r.err;

  // No images: exit 2 at config time, pointing at the key.
  fs::create_directories(dir_ / "empty/sub");
  std::ofstream(dir_ / "empty/sub/readme.txt") << "x";
  const std::string empty = config("empty.yaml", "  kind: files\n  layout: files\n  path: " +
                                                     (dir_ / "empty").string() + "\n  decode: jpeg\n");
  r = RunFeedtune("trial " + empty, dir_);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(empty + ":5:9: workload.path: expected a directory holding JPEG images"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("gen-data --out " + (dir_ / "empty").string() + " --layout jpeg"), std::string::npos) << r.err;
}

TEST_F(JpegDatasetTest, InspectDescribesAFolderOfJpegs) {
  for (int i = 0; i < 3; ++i) WriteJpeg("i/big" + std::to_string(i) + ".jpg", i, 1600, 1200);
  for (int i = 0; i < 6; ++i) WriteJpeg("i/small" + std::to_string(i) + ".jpg", 10 + i, 320, 240);
  WriteFile("i/zz-broken.jpg", std::as_bytes(std::span("no jpeg here", 12)));
  WriteFile("i/readme.md", std::as_bytes(std::span("x", 1)));
  InspectOptions options;
  options.crop = CropMode::kCenter;
  options.resize = 32;
  // Time enough to read all ten (the measurement ends with the folder): 0.2 s
  // measured 8 of the 9 beside two CPU hogs (2026-12-07).
  options.measure_seconds = 60;
  const InspectReport report = Inspect((dir_ / "i").string(), options);
  EXPECT_EQ(report.format, "jpeg");
  const std::string text = report.ToText();
  EXPECT_NE(text.find("images        10 (1 other files skipped)"), std::string::npos) << text;
  EXPECT_NE(text.find("width         min 320 px, p10 320 px, p50 320 px, p90 1600 px, max 1600 px"), std::string::npos)
      << text;
  EXPECT_NE(text.find("headers_read  10 of 10 images"), std::string::npos) << text;
  // Centre crops: 1050 px (1600 x 1200) and 210 px (320 x 240), both >= 2 x 32.
  EXPECT_NE(text.find("crop center, resize 32x32: 9 of 9 decoded with DCT scaling"), std::string::npos) << text;
  // Two from the headers, and one from the measurement, which met the broken file.
  ASSERT_EQ(report.warnings.size(), 3u) << text;
  EXPECT_NE(report.warnings[0].find("1 of 10 headers read do not decode (" + (dir_ / "i/zz-broken.jpg").string()),
            std::string::npos)
      << report.warnings[0];
  EXPECT_NE(report.warnings[1].find("the median image is 320 x 240 for a 32 px sample"), std::string::npos)
      << report.warnings[1];
  EXPECT_NE(report.warnings[2].find("1 of the samples measured failed (first: " + (dir_ / "i/zz-broken.jpg").string() +
                                     " (sample 9): not a JPEG"),
            std::string::npos)
      << report.warnings[2];
  EXPECT_EQ(report.measured_samples, 9);
  const nlohmann::json json = nlohmann::json::parse(report.ToJson());
  EXPECT_EQ(json["facts"]["images"], 10);
  EXPECT_EQ(json["facts"]["width"]["max"], 1600);
  EXPECT_EQ(json["facts"]["file_bytes"]["min"], 12);
  EXPECT_EQ(json["facts"]["decode"]["dct_scaled"], 9);

  // Without the broken file the measurement runs through every image.
  fs::remove(dir_ / "i/zz-broken.jpg");
  const InspectReport clean = Inspect((dir_ / "i").string(), options);
  EXPECT_TRUE(clean.warnings.size() == 1u) << clean.ToText();
  EXPECT_EQ(clean.measured_what, "read + decode");
  EXPECT_GT(clean.measured_samples, 0);
  EXPECT_NE(clean.ToText().find("read + decode, one thread, shuffled: "), std::string::npos) << clean.ToText();
  const nlohmann::json measured = nlohmann::json::parse(clean.ToJson());
  EXPECT_EQ(measured["measurement"]["what"], "read + decode");
  EXPECT_GT(measured["measurement"]["read_us_median"].get<double>(), 0);

  // Through the binary: the same, and a folder without images is exit 2.
  auto r = testing_util::RunFeedtune("inspect " + (dir_ / "i").string() + " --crop center --resize 32 --format json "
                                     "--measure-seconds 0.1", dir_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["format"], "jpeg");
  fs::create_directories(dir_ / "nothing");
  r = testing_util::RunFeedtune("inspect " + (dir_ / "nothing").string(), dir_);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no JPEG images under it"), std::string::npos) << r.err;
  r = testing_util::RunFeedtune("inspect " + (dir_ / "i").string() + " --crop middle", dir_);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--crop: expected random or center, got 'middle'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace feedtune::workloads

// The sharded formats (kind tfrecord and tar): every sample read back as
// gen-data's writer wrote it, map-style and streaming through the real
// DataLoader, and hostile files named by file and offset.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "loader/data_loader.h"
#include "workloads/files_dataset.h"
#include "workloads/jpeg_image.h"
#include "workloads/shard_format.h"
#include "workloads/synthetic_dataset.h"
#include "workloads/tar_dataset.h"
#include "workloads/tfrecord_dataset.h"

namespace feedtune::workloads {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kShardSeed = 7;
constexpr int64_t kBytes = 300;

std::vector<std::byte> ShardContent(int64_t i, int64_t bytes = kBytes) {
  std::vector<std::byte> out(static_cast<size_t>(bytes));
  SyntheticDataset::FillContent(kShardSeed, i, out);
  return out;
}

std::vector<std::byte> TarSampleBytes(int64_t i) {
  std::vector<std::byte> out = ShardContent(i);
  const std::string cls = TarWriter::ClassText(i);
  for (const char c : cls) out.push_back(static_cast<std::byte>(c));
  return out;
}

SyntheticOptions ShardNoCost() {
  SyntheticOptions cost;
  cost.cpu_us_per_sample = 0;
  return cost;
}

std::vector<std::byte> FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(raw.size());
  std::memcpy(out.data(), raw.data(), raw.size());
  return out;
}

void WriteFile(const std::string& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

class ShardFormats : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("feedtune-shards-" + std::to_string(getpid()) + "-" +
                                         testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    files_.path = dir_.string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  void WriteTfRecords(int64_t samples, int shards) {
    TfRecordWriter writer(dir_.string(), samples, shards);
    for (int64_t i = 0; i < samples; ++i) writer.Add(ShardContent(i));
    writer.Finish();
  }
  void WriteTars(int64_t samples, int shards) {
    TarWriter writer(dir_.string(), samples, shards);
    for (int64_t i = 0; i < samples; ++i) writer.Add(ShardContent(i));
    writer.Finish();
  }
  std::string First(const std::string& extension) const {
    return GenDataShardPath(dir_.string(), 0, 1, extension);
  }
  template <typename D>
  std::string OpenError() {
    try {
      D dataset(files_, format_, ShardNoCost(), CpuCalibration{});
      std::vector<std::byte> out(static_cast<size_t>(dataset.max_sample_bytes()));
      for (int64_t i = 0; i < dataset.size(); ++i) dataset.Read(i, out);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "no error";
  }

  fs::path dir_;
  FilesOptions files_;
  FormatOptions format_;
};

// Reads every sample of `dataset` through a DataLoader (process workers) and
// returns them by index.
std::vector<std::vector<std::byte>> ReadAll(std::shared_ptr<const loader::Dataset> dataset, int workers) {
  loader::LoaderOptions o;
  o.knobs.batch_size = 3;
  o.knobs.num_workers = workers;
  o.drop_last = false;
  o.shuffle = true;
  o.shuffle_buffer = 4;
  o.timeout_s = 30;
  loader::DataLoader loader(dataset, o);
  std::vector<std::vector<std::byte>> samples(static_cast<size_t>(dataset->size()));
  loader.StartEpoch(0);
  while (auto batch = loader.Next()) {
    for (size_t i = 0; i < batch->sample_indices.size(); ++i) {
      auto& slot = samples[static_cast<size_t>(batch->sample_indices[i])];
      EXPECT_TRUE(slot.empty()) << "sample " << batch->sample_indices[i] << " twice";
      const std::byte* p = batch->data.data() + i * static_cast<size_t>(batch->stride);
      slot.assign(p, p + batch->stride);
    }
  }
  return samples;
}

TEST_F(ShardFormats, TfRecordFeatureIsGenDatasPayloadMapAndStream) {
  WriteTfRecords(23, 4);
  format_.feature = "data";
  for (const ShardAccess access : {ShardAccess::kRandom, ShardAccess::kStream}) {
    format_.access = access;
    auto dataset = std::make_shared<TfRecordDataset>(files_, format_, ShardNoCost(), CpuCalibration{});
    ASSERT_EQ(dataset->size(), 23);
    EXPECT_EQ(dataset->num_shards(), access == ShardAccess::kStream ? 4 : 0);
    const auto samples = ReadAll(dataset, 2);
    for (int64_t i = 0; i < 23; ++i) {
      const auto want = ShardContent(i);
      ASSERT_GE(samples[static_cast<size_t>(i)].size(), want.size());
      EXPECT_TRUE(std::equal(want.begin(), want.end(), samples[static_cast<size_t>(i)].begin())) << "sample " << i;
    }
  }
}

TEST_F(ShardFormats, TfRecordWholeRecordIsTheSerializedExample) {
  WriteTfRecords(5, 1);
  TfRecordDataset dataset(files_, format_, ShardNoCost(), CpuCalibration{});
  std::vector<std::byte> out(static_cast<size_t>(dataset.max_sample_bytes()));
  for (int64_t i = 0; i < 5; ++i) {
    const int64_t n = dataset.Read(i, out);
    const auto payload = ShardContent(i);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(out.data()), static_cast<size_t>(n)),
              ExampleRecord("data", payload, "index", i));
  }
}

TEST_F(ShardFormats, TfRecordIndexIsDalisFormatAndIsReused) {
  WriteTfRecords(3, 1);
  const std::string idx = First(".tfrecord") + ".idx";
  std::ifstream in(idx);
  std::string line;
  std::getline(in, line);
  const std::string record = ExampleRecord("data", ShardContent(0), "index", 0);
  EXPECT_EQ(line, "0 " + std::to_string(record.size() + 16));
  TfRecordDataset dataset(files_, format_, ShardNoCost(), CpuCalibration{});
  EXPECT_EQ(dataset.shards()[0].index_status, "found beside the data");
  fs::remove(idx);
  TfRecordDataset rebuilt(files_, format_, ShardNoCost(), CpuCalibration{});
  EXPECT_EQ(rebuilt.shards()[0].index_status, "built, written beside the data");
  EXPECT_TRUE(fs::exists(idx));
}

TEST_F(ShardFormats, TfRecordTruncatedRecordIsNamed) {
  WriteTfRecords(3, 1);
  const std::string path = First(".tfrecord");
  fs::remove(path + ".idx");
  auto bytes = FileBytes(path);
  bytes.resize(bytes.size() - 10);
  WriteFile(path, bytes);
  const std::string error = OpenError<TfRecordDataset>();
  EXPECT_NE(error.find(path + ": record at byte "), std::string::npos) << error;
  EXPECT_NE(error.find("truncated"), std::string::npos) << error;
}

TEST_F(ShardFormats, TfRecordBadLengthCrcIsNamed) {
  WriteTfRecords(3, 1);
  const std::string path = First(".tfrecord");
  fs::remove(path + ".idx");
  auto bytes = FileBytes(path);
  bytes[8] ^= std::byte{1};  // the first record's length CRC
  WriteFile(path, bytes);
  EXPECT_EQ(OpenError<TfRecordDataset>(),
            path + ": record at byte 0: bad length CRC (not a TFRecord file, or damaged)");
}

TEST_F(ShardFormats, TfRecordBadDataCrcIsNamedOnRead) {
  WriteTfRecords(3, 1);
  const std::string path = First(".tfrecord");
  auto bytes = FileBytes(path);
  const size_t second = ExampleRecord("data", ShardContent(0), "index", 0).size() + 16;
  bytes[second + 20] ^= std::byte{0x40};  // inside record 1's data
  WriteFile(path, bytes);
  EXPECT_EQ(OpenError<TfRecordDataset>(),
            path + ": record 1 at byte " + std::to_string(second) + ": bad data CRC (the record is damaged)");
}

TEST_F(ShardFormats, TfRecordStaleIndexIsNamedWithTheFix) {
  WriteTfRecords(3, 1);
  const std::string path = First(".tfrecord");
  std::ofstream(path + ".idx", std::ios::app) << "99999 40\n";
  const std::string error = OpenError<TfRecordDataset>();
  EXPECT_NE(error.find(path + ".idx: a stale index, it does not match " + path), std::string::npos) << error;
  EXPECT_NE(error.find("delete it and feedtune rebuilds it"), std::string::npos) << error;
}

TEST_F(ShardFormats, TfRecordNonExampleWithFeatureIsNamed) {
  std::vector<std::byte> file;
  const std::string junk = "\xff\xff\xff not a protobuf";
  AppendTfRecord(std::as_bytes(std::span(junk.data(), junk.size())), &file);
  const std::string path = (dir_ / "raw.tfrecord").string();
  WriteFile(path, file);
  format_.feature = "image";
  EXPECT_EQ(OpenError<TfRecordDataset>(), path + ": record 0 at byte 0: not a tf.train.Example, so it has no "
                                                 "feature 'image' (drop workload.feature to read whole records)");
}

TEST_F(ShardFormats, TfRecordMissingFeatureListsTheOnesThereAre) {
  WriteTfRecords(2, 1);
  format_.feature = "image";
  const std::string error = OpenError<TfRecordDataset>();
  EXPECT_NE(error.find("the Example has no feature 'image' (it has: data, index)"), std::string::npos) << error;
}

TEST_F(ShardFormats, TarSamplesAreGenDatasMembersMapAndStream) {
  WriteTars(17, 3);
  for (const ShardAccess access : {ShardAccess::kRandom, ShardAccess::kStream}) {
    format_.access = access;
    auto dataset = std::make_shared<TarDataset>(files_, format_, ShardNoCost(), CpuCalibration{});
    ASSERT_EQ(dataset->size(), 17);
    EXPECT_EQ(dataset->shards()[0].fields, (std::vector<std::string>{"bin", "cls"}));
    const auto samples = ReadAll(dataset, 3);
    for (int64_t i = 0; i < 17; ++i) {
      const auto want = TarSampleBytes(i);
      ASSERT_GE(samples[static_cast<size_t>(i)].size(), want.size());
      EXPECT_TRUE(std::equal(want.begin(), want.end(), samples[static_cast<size_t>(i)].begin())) << "sample " << i;
    }
  }
}

TEST_F(ShardFormats, TarMemberCutShortIsNamed) {
  WriteTars(4, 1);
  const std::string path = First(".tar");
  auto bytes = FileBytes(path);
  bytes.resize(2048 + 512 + 100);  // sample 0's two members (header + padded data each), then a piece of sample 1
  WriteFile(path, bytes);
  EXPECT_EQ(OpenError<TarDataset>(), path + ": member '000000001.bin' at byte 2048 is cut short: its header says " +
                                         std::to_string(kBytes) + " bytes, 100 are left");
}

TEST_F(ShardFormats, TarWithNoCompleteSampleIsNamed) {
  std::vector<std::byte> file;
  const std::string text = "hello";
  AppendTarMember("README", std::as_bytes(std::span(text.data(), text.size())), &file);
  AppendTarEnd(&file);
  const std::string path = (dir_ / "a.tar").string();
  WriteFile(path, file);
  EXPECT_EQ(OpenError<TarDataset>(), path + ": no complete sample (1 regular members, none named KEY.EXT as "
                                            "WebDataset shards are)");
}

TEST_F(ShardFormats, TarBadChecksumIsNamed) {
  WriteTars(2, 1);
  const std::string path = First(".tar");
  auto bytes = FileBytes(path);
  bytes[1024 + 3] ^= std::byte{1};  // sample 0's .cls header
  WriteFile(path, bytes);
  EXPECT_EQ(OpenError<TarDataset>(),
            path + ": byte 1024: a tar header with a bad checksum (not a tar file, or damaged)");
}

// decode: jpeg on the sharded formats. Small images, so that decoding them
// all through the loader stays quick.
constexpr int kImageWidth = 64;
constexpr int kImageHeight = 48;
constexpr int64_t kResize = 24;

std::vector<std::byte> Jpeg(int64_t i) {
  std::vector<uint8_t> rgb(static_cast<size_t>(kImageWidth * kImageHeight * 3));
  SynthesizeImage(kShardSeed, i, kImageWidth, kImageHeight, rgb);
  return EncodeJpeg(rgb, kImageWidth, kImageHeight, 85);
}

// What DecodeCropResize makes of image i with the options the datasets are given.
std::vector<std::byte> Decoded(int64_t i, int64_t epoch, CropMode crop = CropMode::kRandom) {
  JpegDecodeOptions o;
  o.crop = crop;
  o.resize = static_cast<int>(kResize);
  o.seed = kShardSeed;
  o.epoch = epoch;
  std::vector<std::byte> out(static_cast<size_t>(kResize * kResize * 3));
  DecodeCropResize(Jpeg(i), i, o, out);
  return out;
}

SyntheticOptions JpegCost() {
  SyntheticOptions cost = ShardNoCost();
  cost.seed = kShardSeed;
  return cost;
}

class ShardJpeg : public ShardFormats {
 protected:
  void SetUp() override {
    ShardFormats::SetUp();
    files_.decode = FilesDecode::kJpeg;
    files_.resize = kResize;
  }
  // Every sample of `dataset`, read with Read() after SetEpoch(epoch).
  static std::vector<std::vector<std::byte>> ReadEach(const loader::Dataset& dataset, int64_t epoch) {
    dataset.SetEpoch(epoch);
    std::vector<std::vector<std::byte>> samples;
    std::vector<std::byte> out(static_cast<size_t>(dataset.max_sample_bytes()));
    for (int64_t i = 0; i < dataset.size(); ++i) {
      const int64_t n = dataset.Read(i, out);
      samples.emplace_back(out.begin(), out.begin() + n);
    }
    return samples;
  }
};

// Records whose bytes are a JPEG (no feature) and gen-data's Examples with
// the JPEG under "data" (feature: data), map-style and streaming: each sample
// is what DecodeCropResize and the files dataset make of the same JPEG.
TEST_F(ShardJpeg, TfRecordRecordsAndFeaturesDecodeAsFilesDo) {
  constexpr int64_t kSamples = 9;
  std::vector<std::byte> raw;
  for (int64_t i = 0; i < kSamples; ++i) AppendTfRecord(Jpeg(i), &raw);
  fs::create_directories(dir_ / "raw");
  WriteFile((dir_ / "raw" / "a.tfrecord").string(), raw);
  TfRecordWriter writer((dir_ / "examples").string(), kSamples, 3);
  fs::create_directories(dir_ / "jpegs");
  for (int64_t i = 0; i < kSamples; ++i) {
    writer.Add(Jpeg(i));
    WriteFile((dir_ / "jpegs" / ("img" + std::to_string(i) + ".jpg")).string(), Jpeg(i));
  }
  writer.Finish();

  FilesOptions files = files_;
  files.path = (dir_ / "jpegs").string();
  files.layout = FilesLayout::kFiles;
  const FilesDataset reference(files, JpegCost(), CpuCalibration{});
  ASSERT_EQ(reference.size(), kSamples);
  for (const bool feature : {false, true}) {
    files_.path = (dir_ / (feature ? "examples" : "raw")).string();
    format_.feature = feature ? "data" : "";
    for (const ShardAccess access : {ShardAccess::kRandom, ShardAccess::kStream}) {
      format_.access = access;
      auto dataset = std::make_shared<TfRecordDataset>(files_, format_, JpegCost(), CpuCalibration{});
      ASSERT_EQ(dataset->size(), kSamples);
      EXPECT_EQ(dataset->max_sample_bytes(), kResize * kResize * 3);
      EXPECT_NE(dataset->Describe().find("decoded as JPEG"), std::string::npos) << dataset->Describe();
      const auto streamed = ReadAll(dataset, 2);  // epoch 0, through the loader's workers
      const auto at_epoch_3 = ReadEach(*dataset, 3);
      // imgN.jpg sort in sample order: the files dataset's sample i is the same JPEG.
      const auto from_files = ReadEach(reference, 3);
      for (int64_t i = 0; i < kSamples; ++i) {
        const size_t at = static_cast<size_t>(i);
        EXPECT_EQ(streamed[at], Decoded(i, 0)) << "feature " << feature << ", sample " << i;
        EXPECT_EQ(at_epoch_3[at], Decoded(i, 3)) << "feature " << feature << ", sample " << i;
        EXPECT_EQ(at_epoch_3[at], from_files[at]) << "feature " << feature << ", sample " << i;
      }
    }
  }
}

// gen-data's tar samples with the JPEG as KEY.jpg, map-style and streaming.
TEST_F(ShardJpeg, TarJpegMemberDecodesMapAndStream) {
  constexpr int64_t kSamples = 11;
  TarWriter writer(dir_.string(), kSamples, 3, "jpg");
  for (int64_t i = 0; i < kSamples; ++i) writer.Add(Jpeg(i));
  writer.Finish();
  files_.crop = CropMode::kCenter;
  for (const ShardAccess access : {ShardAccess::kRandom, ShardAccess::kStream}) {
    format_.access = access;
    auto dataset = std::make_shared<TarDataset>(files_, format_, JpegCost(), CpuCalibration{});
    ASSERT_EQ(dataset->size(), kSamples);
    EXPECT_EQ(dataset->shards()[0].fields, (std::vector<std::string>{"jpg", "cls"}));
    EXPECT_EQ(dataset->max_sample_bytes(), kResize * kResize * 3);
    const auto samples = ReadAll(dataset, 3);
    for (int64_t i = 0; i < kSamples; ++i) {
      EXPECT_EQ(samples[static_cast<size_t>(i)], Decoded(i, 0, CropMode::kCenter)) << "sample " << i;
    }
  }
  files_.crop = CropMode::kRandom;
  const TarDataset random_crops(files_, format_, JpegCost(), CpuCalibration{});
  const auto at_epoch_2 = ReadEach(random_crops, 2);
  for (int64_t i = 0; i < kSamples; ++i) EXPECT_EQ(at_epoch_2[static_cast<size_t>(i)], Decoded(i, 2)) << i;
}

TEST_F(ShardJpeg, TfRecordCorruptJpegIsNamed) {
  std::vector<std::byte> file;
  AppendTfRecord(Jpeg(0), &file);
  const size_t second = file.size();
  const std::string junk = "not a JPEG at all";
  AppendTfRecord(std::as_bytes(std::span(junk.data(), junk.size())), &file);
  const std::string path = (dir_ / "bad.tfrecord").string();
  WriteFile(path, file);
  for (const ShardAccess access : {ShardAccess::kRandom, ShardAccess::kStream}) {
    format_.access = access;
    const std::string error = OpenError<TfRecordDataset>();
    EXPECT_TRUE(error.starts_with(path + ": record 1 at byte " + std::to_string(second) +
                                  ": decode: jpeg: not a JPEG, or its header is damaged: "))
        << error;
  }
  // In a feature: the feature is named too.
  fs::remove(path);
  fs::remove(path + ".idx");
  TfRecordWriter writer(dir_.string(), 2, 1);
  writer.Add(Jpeg(0));
  writer.Add(std::as_bytes(std::span(junk.data(), junk.size())));
  writer.Finish();
  format_.feature = "data";
  const std::string error = OpenError<TfRecordDataset>();
  EXPECT_NE(error.find(First(".tfrecord") + ": record 1 at byte "), std::string::npos) << error;
  EXPECT_NE(error.find(", feature 'data': decode: jpeg: not a JPEG"), std::string::npos) << error;
}

TEST_F(ShardJpeg, TarCorruptJpegNamesTheMember) {
  TarWriter writer(dir_.string(), 3, 1, "jpg");
  writer.Add(Jpeg(0));
  const std::string junk = "\xff\xd8 cut";
  writer.Add(std::as_bytes(std::span(junk.data(), junk.size())));
  writer.Add(Jpeg(2));
  writer.Finish();
  const std::string error = OpenError<TarDataset>();
  EXPECT_TRUE(error.starts_with(First(".tar") + ": sample 1, member '000000001.jpg' at byte ")) << error;
  EXPECT_NE(error.find(": decode: jpeg: "), std::string::npos) << error;
}

TEST_F(ShardJpeg, TarSampleWithoutJpegNamesKeyAndMembers) {
  WriteTars(2, 1);  // KEY.bin and KEY.cls
  EXPECT_EQ(OpenError<TarDataset>(),
            First(".tar") + ": sample '000000000' has no JPEG member (decode: jpeg reads the one named KEY.jpg or "
                            "KEY.jpeg, any case, or raw pixels as KEY.ppm); its members: 000000000.bin, 000000000.cls; write the images as "
                            "KEY.jpg members (`feedtune gen-data --layout tar --jpeg` does), or drop decode: jpeg");
}

// workload.path as a list: exactly those shards, in list order (a glob's own
// matches sorted), and an entry that names none is named.
TEST_F(ShardFormats, PathListReadsThoseShardsInListOrder) {
  WriteTars(12, 4);  // 3 samples a shard
  const auto shard = [&](int s) { return GenDataShardPath(dir_.string(), s, 4, ".tar"); };
  files_.path.clear();
  files_.path_list = {shard(3), (dir_ / "data-0000[01]-of-00004.tar").string()};
  for (const ShardAccess access : {ShardAccess::kRandom, ShardAccess::kStream}) {
    format_.access = access;
    auto dataset = std::make_shared<TarDataset>(files_, format_, ShardNoCost(), CpuCalibration{});
    ASSERT_EQ(dataset->shards().size(), 3u);
    EXPECT_EQ(dataset->shards()[0].path, shard(3));
    EXPECT_EQ(dataset->shards()[1].path, shard(0));
    EXPECT_EQ(dataset->shards()[2].path, shard(1));
    ASSERT_EQ(dataset->size(), 9);
    const auto samples = ReadAll(dataset, 2);
    for (int64_t i = 0; i < 9; ++i) {
      const int64_t written = i < 3 ? 9 + i : i - 3;  // shard 3's samples first
      const auto want = TarSampleBytes(written);
      ASSERT_GE(samples[static_cast<size_t>(i)].size(), want.size());
      EXPECT_TRUE(std::equal(want.begin(), want.end(), samples[static_cast<size_t>(i)].begin())) << "sample " << i;
    }
  }
  const std::string missing = (dir_ / "other-*.tar").string();
  files_.path_list = {shard(0), missing};
  EXPECT_EQ(OpenError<TarDataset>(), "entry [1] of the list, " + missing + ": the pattern matches no file");
  files_.path_list = {shard(0), (dir_ / "*.tar").string()};
  EXPECT_EQ(OpenError<TarDataset>(), "entry [1] of the list, \"" + (dir_ / "*.tar").string() + "\", names " +
                                         shard(0) + ", which entry [0], \"" + shard(0) +
                                         "\", names too; list each shard once (a shard is read once an epoch)");
  WriteTfRecords(6, 2);
  files_.path_list = {GenDataShardPath(dir_.string(), 1, 2, ".tfrecord"),
                      GenDataShardPath(dir_.string(), 0, 2, ".tfrecord")};
  format_.feature = "data";
  const TfRecordDataset tfrecords(files_, format_, ShardNoCost(), CpuCalibration{});
  ASSERT_EQ(tfrecords.size(), 6);
  std::vector<std::byte> out(static_cast<size_t>(tfrecords.max_sample_bytes()));
  ASSERT_EQ(tfrecords.Read(0, out), kBytes);
  const auto want = ShardContent(3);  // the second shard's first record
  EXPECT_TRUE(std::equal(want.begin(), want.end(), out.begin()));
}

// Archives Python's tarfile writes: pax headers for long names, GNU long
// names (seeds of the tar fuzzer).
TEST(TarScanner, ReadsPaxAndGnuLongNames) {
  const std::string corpus = std::string(FEEDTUNE_SOURCE_DIR) + "/tests/fuzz/corpus/tar/";
  for (const auto& [file, names] :
       std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"pax-long-names.tar", {"dir/" + std::string(120, 'x') + ".jpg", "dir/" + std::string(120, 'x') + ".json",
                                   "README"}},
           {"gnu-long-name.tar", {"a/" + std::string(150, 'y') + ".cls"}}}) {
    const auto bytes = FileBytes(corpus + file);
    TarScanner scanner(
        [&](uint64_t offset, std::span<std::byte> out) {
          const size_t n = std::min<size_t>(out.size(), bytes.size() - std::min<size_t>(offset, bytes.size()));
          std::memcpy(out.data(), bytes.data() + offset, n);
          return n;
        },
        bytes.size(), file);
    std::vector<std::string> got;
    TarMember m;
    while (scanner.Next(&m)) got.push_back(m.name);
    EXPECT_EQ(got, names) << file;
  }
}

TEST(TarKey, CutsAsWebDatasetDoes) {
  std::string key, ext;
  ASSERT_TRUE(SplitTarKey("a.b/c.d.jpg", &key, &ext));
  EXPECT_EQ(key, "a.b/c");
  EXPECT_EQ(ext, "d.jpg");
  EXPECT_FALSE(SplitTarKey("dir/README", &key, &ext));
}

}  // namespace
}  // namespace feedtune::workloads

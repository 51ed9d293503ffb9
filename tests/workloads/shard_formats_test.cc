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
#include "workloads/shard_format.h"
#include "workloads/synthetic_dataset.h"
#include "workloads/tar_dataset.h"
#include "workloads/tfrecord_dataset.h"

namespace feedtune::workloads {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kSeed = 7;
constexpr int64_t kBytes = 300;

std::vector<std::byte> Content(int64_t i, int64_t bytes = kBytes) {
  std::vector<std::byte> out(static_cast<size_t>(bytes));
  SyntheticDataset::FillContent(kSeed, i, out);
  return out;
}

std::vector<std::byte> TarSampleBytes(int64_t i) {
  std::vector<std::byte> out = Content(i);
  const std::string cls = TarWriter::ClassText(i);
  for (const char c : cls) out.push_back(static_cast<std::byte>(c));
  return out;
}

SyntheticOptions NoCost() {
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
    for (int64_t i = 0; i < samples; ++i) writer.Add(Content(i));
    writer.Finish();
  }
  void WriteTars(int64_t samples, int shards) {
    TarWriter writer(dir_.string(), samples, shards);
    for (int64_t i = 0; i < samples; ++i) writer.Add(Content(i));
    writer.Finish();
  }
  std::string First(const std::string& extension) const {
    return GenDataShardPath(dir_.string(), 0, 1, extension);
  }
  template <typename D>
  std::string OpenError() {
    try {
      D dataset(files_, format_, NoCost(), CpuCalibration{});
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
    auto dataset = std::make_shared<TfRecordDataset>(files_, format_, NoCost(), CpuCalibration{});
    ASSERT_EQ(dataset->size(), 23);
    EXPECT_EQ(dataset->num_shards(), access == ShardAccess::kStream ? 4 : 0);
    const auto samples = ReadAll(dataset, 2);
    for (int64_t i = 0; i < 23; ++i) {
      const auto want = Content(i);
      ASSERT_GE(samples[static_cast<size_t>(i)].size(), want.size());
      EXPECT_TRUE(std::equal(want.begin(), want.end(), samples[static_cast<size_t>(i)].begin())) << "sample " << i;
    }
  }
}

TEST_F(ShardFormats, TfRecordWholeRecordIsTheSerializedExample) {
  WriteTfRecords(5, 1);
  TfRecordDataset dataset(files_, format_, NoCost(), CpuCalibration{});
  std::vector<std::byte> out(static_cast<size_t>(dataset.max_sample_bytes()));
  for (int64_t i = 0; i < 5; ++i) {
    const int64_t n = dataset.Read(i, out);
    const auto payload = Content(i);
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
  const std::string record = ExampleRecord("data", Content(0), "index", 0);
  EXPECT_EQ(line, "0 " + std::to_string(record.size() + 16));
  TfRecordDataset dataset(files_, format_, NoCost(), CpuCalibration{});
  EXPECT_EQ(dataset.shards()[0].index_status, "found beside the data");
  fs::remove(idx);
  TfRecordDataset rebuilt(files_, format_, NoCost(), CpuCalibration{});
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
  const size_t second = ExampleRecord("data", Content(0), "index", 0).size() + 16;
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
    auto dataset = std::make_shared<TarDataset>(files_, format_, NoCost(), CpuCalibration{});
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

// The remote datasets (workloads/remote_dataset.h, remote_tar_dataset.h,
// remote_npy_dataset.h)
// against the project's own store (scripts/s3-rig, no latency): every sample
// read from an s3:// prefix or an http(s) URL holds exactly the bytes the
// local dataset over the same files reads, through Read, ReadMany at several
// requests in flight, and a stream's shards; with decode: jpeg, exactly the
// decoded, cropped and resized tensors of the local dataset for the same
// seed, epoch and sample, over one object per sample and over tar shards of
// JPEGs and of raw pixels; and what a wrong source says. One rig for the
// suite; every test skips without s3rver.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "tests/storage/rig.h"
#include "workloads/files_dataset.h"
#include "workloads/jpeg_image.h"
#include "workloads/npy_dataset.h"
#include "workloads/npy_format.h"
#include "workloads/remote_npy_dataset.h"
#include "workloads/remote_dataset.h"
#include "workloads/remote_tar_dataset.h"
#include "workloads/shard_format.h"
#include "workloads/tar_dataset.h"

namespace feedtune::storage::testing {
namespace {

namespace fs = std::filesystem;
using workloads::CpuCalibration;
using workloads::FilesOptions;
using workloads::FormatOptions;
using workloads::RemoteTarDataset;
using workloads::ShardAccess;
using workloads::SyntheticOptions;
using workloads::TarDataset;

constexpr int kSamples = 60;
constexpr int kShards = 3;
constexpr int kImages = 12;
constexpr uint64_t kSeed = 42;  // the crops' seed

SyntheticOptions NoCost() {
  SyntheticOptions cost;
  cost.cpu_us_per_sample = 0;
  cost.seed = kSeed;
  return cost;
}

// Sample i's payload: sizes from 100 bytes to past the scan's 1 MiB window,
// so that the index reads headers both inside one window and across them.
std::string Payload(int i) {
  const size_t size = i % 7 == 3 ? (size_t{1} << 20) + 777 : 100 + 997 * static_cast<size_t>(i);
  return TestBytes("sample" + std::to_string(i), size);
}

std::vector<std::byte> ReadOne(const loader::Dataset& dataset, int64_t index) {
  std::vector<std::byte> out(static_cast<size_t>(dataset.max_sample_bytes()));
  out.resize(static_cast<size_t>(dataset.Read(index, out)));
  return out;
}

// Image i: a JPEG of gen-data's content, of a size of its own (some under
// twice the 224 crop, some over it, so both decode scales are read).
std::vector<std::byte> Image(int i) {
  const int width = 120 + 53 * i;
  const int height = 90 + 31 * i;
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * static_cast<size_t>(height) * 3);
  workloads::SynthesizeImage(7, i, width, height, rgb);
  return workloads::EncodeJpeg(rgb, width, height, 85);
}

void WriteFile(const fs::path& path, std::span<const std::byte> bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
}

// The JPEGs as a folder (beside a file that is not one, which decode: jpeg
// skips), as tar shards of JPEG members and as tar shards of raw pixels
// (`convert --pixels`'s PPMs), each under `root`.
void WriteImages(const fs::path& root) {
  workloads::TarWriter jpegs((root / "jpeg-shards").string(), kImages, 2, "jpg");
  workloads::TarWriter pixels((root / "pixel-shards").string(), kImages, 2, "ppm");
  for (int i = 0; i < kImages; ++i) {
    const std::vector<std::byte> jpeg = Image(i);
    char name[32];
    std::snprintf(name, sizeof name, "%02d/img%03d.jpg", i / 5, i);
    WriteFile(root / "jpegs" / name, jpeg);
    jpegs.Add(jpeg);
    pixels.Add(workloads::DecodeToPpm(jpeg));
  }
  jpegs.Finish();
  pixels.Finish();
  std::ofstream(root / "jpegs" / "labels.txt") << "not an image";
}

// Every sample of `remote` holds exactly what `local` reads for it, in two
// epochs (a random crop is drawn per epoch): through Read, and through
// ReadMany at 4 in flight in a shuffled order, or for a stream its shards.
void ExpectTheLocalTensors(const loader::Dataset& remote, const loader::Dataset& local) {
  ASSERT_EQ(remote.size(), local.size());
  ASSERT_EQ(remote.max_sample_bytes(), 224 * 224 * 3);
  ASSERT_EQ(remote.max_sample_bytes(), local.max_sample_bytes());
  for (const int64_t epoch : {0, 3}) {
    remote.SetEpoch(epoch);
    local.SetEpoch(epoch);
    std::vector<std::vector<std::byte>> want;
    for (int64_t i = 0; i < local.size(); ++i) want.push_back(ReadOne(local, i));
    for (int64_t i = 0; i < remote.size(); ++i) {
      ASSERT_EQ(ReadOne(remote, i), want[static_cast<size_t>(i)]) << "epoch " << epoch << ", sample " << i;
    }
    if (remote.num_shards() > 0) {
      for (int64_t shard = 0; shard < remote.num_shards(); ++shard) {
        const auto reader = remote.OpenShard(shard);
        std::vector<std::byte> sample;
        int64_t index = -1;
        while (reader->Next(&sample, &index)) {
          ASSERT_EQ(sample, want[static_cast<size_t>(index)]) << "epoch " << epoch << ", streamed sample " << index;
        }
      }
      continue;
    }
    std::vector<int64_t> order(static_cast<size_t>(remote.size()));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(epoch) + 1));
    const int64_t stride = remote.max_sample_bytes();
    std::vector<std::byte> slot(order.size() * static_cast<size_t>(stride));
    std::vector<int64_t> bytes(order.size());
    remote.ReadMany(order, slot, stride, 4, bytes);
    for (size_t k = 0; k < order.size(); ++k) {
      const std::vector<std::byte>& expected = want[static_cast<size_t>(order[k])];
      ASSERT_EQ(bytes[k], static_cast<int64_t>(expected.size()));
      ASSERT_TRUE(std::equal(expected.begin(), expected.end(), slot.begin() + static_cast<ptrdiff_t>(k * stride)))
          << "epoch " << epoch << ", sample " << order[k] << " read with others";
    }
  }
}

class RemoteData : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    rig_ = new Rig();
    const CommandResult started = rig_->Start();
    if (started.code == 77) {
      skip_ = "the S3 rig is not installed (scripts/setup-deps --s3): " + started.output;
      return;
    }
    if (started.code != 0) {
      failure_ = "s3-rig start failed: " + started.output;
      return;
    }
    try {
      local_ = rig_->dir() / "shards";
      workloads::TarWriter writer(local_.string(), kSamples, kShards);
      for (int i = 0; i < kSamples; ++i) {
        const std::string payload = Payload(i);
        writer.Add(std::as_bytes(std::span(payload.data(), payload.size())));
      }
      writer.Finish();
      rig_->Put(local_, "s3://feedtune/shards/");
      first_shard_ = fs::path(workloads::GenDataShardPath(local_.string(), 0, kShards, ".tar")).filename();
      fs::copy_file(local_ / first_shard_, rig_->http_root() / first_shard_);
      fs::create_directories(rig_->dir() / "other");
      std::ofstream(rig_->dir() / "other" / "notes.txt") << "not a shard";
      rig_->Put(rig_->dir() / "other", "s3://feedtune/other/");
      images_ = rig_->dir() / "images";
      WriteImages(images_);
      rig_->Put(images_ / "jpegs", "s3://feedtune/jpegs/");
      rig_->Put(images_ / "jpeg-shards", "s3://feedtune/jpeg-shards/");
      rig_->Put(images_ / "pixel-shards", "s3://feedtune/pixel-shards/");
    } catch (const std::exception& error) {
      failure_ = error.what();
    }
  }
  static void TearDownTestSuite() {
    delete rig_;
    rig_ = nullptr;
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(failure_.empty()) << failure_;
  }

  static FilesOptions Files(const std::string& path) {
    FilesOptions files;
    files.path = path;
    return files;
  }
  static FilesOptions Decoded(const std::string& path) {
    FilesOptions files = Files(path);
    files.decode = workloads::FilesDecode::kJpeg;
    return files;
  }
  static std::unique_ptr<RemoteTarDataset> Remote(const std::string& path, ShardAccess access) {
    FormatOptions format;
    format.access = access;
    return std::make_unique<RemoteTarDataset>(Files(path), format, NoCost(), CpuCalibration{}, rig_->env());
  }
  static std::unique_ptr<TarDataset> Local(const std::string& path) {
    return std::make_unique<TarDataset>(Files(path), FormatOptions{}, NoCost(), CpuCalibration{});
  }

  static Rig* rig_;
  static std::string skip_;
  static std::string failure_;
  static fs::path local_;
  static std::string first_shard_;
  static fs::path images_;  // the JPEGs: a folder, tar shards of them and of their pixels
};

Rig* RemoteData::rig_ = nullptr;
std::string RemoteData::skip_;
std::string RemoteData::failure_;
fs::path RemoteData::local_;
std::string RemoteData::first_shard_;
fs::path RemoteData::images_;

TEST_F(RemoteData, TarShardsByRangesHoldTheLocalBytes) {
  const auto remote = Remote("s3://feedtune/shards/", ShardAccess::kRandom);
  const auto local = Local(local_.string());
  ASSERT_EQ(remote->size(), kSamples);
  ASSERT_EQ(remote->shards().size(), static_cast<size_t>(kShards));
  EXPECT_EQ(remote->max_sample_bytes(), local->max_sample_bytes());
  EXPECT_TRUE(remote->reads_concurrently());
  EXPECT_EQ(remote->num_shards(), 0);  // random access: map-style
  for (int i = 0; i < kSamples; ++i) {
    const std::vector<std::byte> want = ReadOne(*local, i);
    const std::string payload = Payload(i);
    ASSERT_EQ(ReadOne(*remote, i), want) << "sample " << i;
    // The payload member, then KEY.cls: the fields' bytes in member order.
    ASSERT_EQ(std::string(reinterpret_cast<const char*>(want.data()), payload.size()), payload);
  }
  // The shards' headers, read in windows: far fewer GETs than members.
  int64_t requests = 0;
  for (const auto& shard : remote->shards()) requests += shard.index_requests;
  EXPECT_LT(requests, kSamples) << remote->Describe();
  EXPECT_NE(remote->Describe().find("s3://feedtune/shards/: 3 tar shard(s), 60 samples of fields bin, cls"),
            std::string::npos)
      << remote->Describe();
}

TEST_F(RemoteData, ReadManyAtEachConcurrencyPutsEverySampleInItsPlace) {
  const auto remote = Remote("s3://feedtune/shards/", ShardAccess::kRandom);
  const auto local = Local(local_.string());
  std::vector<int64_t> order(kSamples);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  const int64_t stride = remote->max_sample_bytes();
  for (const int concurrency : {1, 4, 16}) {
    std::vector<std::byte> slot(order.size() * static_cast<size_t>(stride));
    std::vector<int64_t> bytes(order.size());
    remote->ReadMany(order, slot, stride, concurrency, bytes);
    for (size_t i = 0; i < order.size(); ++i) {
      const std::vector<std::byte> want = ReadOne(*local, order[i]);
      ASSERT_EQ(bytes[i], static_cast<int64_t>(want.size())) << "concurrency " << concurrency << ", place " << i;
      ASSERT_TRUE(std::equal(want.begin(), want.end(), slot.begin() + static_cast<ptrdiff_t>(i * stride)))
          << "concurrency " << concurrency << ", sample " << order[i];
    }
  }
}

TEST_F(RemoteData, AStreamReadsEachShardInOrder) {
  const auto remote = Remote("s3://feedtune/shards/", ShardAccess::kStream);
  const auto local = Local(local_.string());
  ASSERT_EQ(remote->num_shards(), kShards);
  EXPECT_FALSE(remote->reads_concurrently());  // a stream's requests in flight are its workers
  int64_t next = 0;
  for (int64_t shard = 0; shard < kShards; ++shard) {
    const auto reader = remote->OpenShard(shard);
    std::vector<std::byte> sample;
    int64_t index = -1;
    int64_t read = 0;
    while (reader->Next(&sample, &index)) {
      ASSERT_EQ(index, next) << "shard " << shard;
      ASSERT_EQ(sample, ReadOne(*local, index)) << "sample " << index;
      ++next;
      ++read;
    }
    EXPECT_EQ(read, remote->shard_samples(shard));
  }
  EXPECT_EQ(next, kSamples);
}

TEST_F(RemoteData, OneShardFromAPlainWebServer) {
  const auto remote = Remote(rig_->http_url() + "/" + first_shard_, ShardAccess::kRandom);
  const auto local = Local((local_ / first_shard_).string());
  ASSERT_EQ(remote->size(), local->size());
  for (int64_t i = 0; i < local->size(); ++i) ASSERT_EQ(ReadOne(*remote, i), ReadOne(*local, i)) << "sample " << i;
  EXPECT_NE(remote->Describe().find("plain HTTP(S), unsigned"), std::string::npos) << remote->Describe();
}

TEST_F(RemoteData, DecodeJpegOverAnObjectPerSampleGivesTheLocalTensors) {
  FilesOptions files = Decoded("s3://feedtune/jpegs/");
  files.layout = workloads::FilesLayout::kFiles;
  const workloads::RemoteDataset remote(files, NoCost(), CpuCalibration{}, rig_->env());
  files.path = (images_ / "jpegs").string();
  const workloads::FilesDataset local(files, NoCost(), CpuCalibration{});
  ASSERT_EQ(remote.size(), kImages);  // labels.txt is not an image, here or there
  ExpectTheLocalTensors(remote, local);
  EXPECT_NE(remote.Describe().find("1 objects not named .jpg/.jpeg skipped"), std::string::npos) << remote.Describe();
}

TEST_F(RemoteData, DecodeJpegOverTarShardsGivesTheLocalTensors) {
  // JPEG members and raw pixels (.ppm), each by ranges and streamed.
  for (const std::string name : {"jpeg-shards", "pixel-shards"}) {
    const TarDataset local(Decoded((images_ / name).string()), FormatOptions{}, NoCost(), CpuCalibration{});
    for (const ShardAccess access : {ShardAccess::kRandom, ShardAccess::kStream}) {
      SCOPED_TRACE(name + (access == ShardAccess::kStream ? ", streamed" : ", by ranges"));
      FormatOptions format;
      format.access = access;
      const RemoteTarDataset remote(Decoded("s3://feedtune/" + name + "/"), format, NoCost(), CpuCalibration{},
                                    rig_->env());
      ExpectTheLocalTensors(remote, local);
    }
  }
}

// A .npy file's rows by ranged GETs, from an s3:// key and from a plain web
// server: each row the bytes NpyDataset reads from the same file, through
// Read and through ReadMany at 1, 4 and 16 in flight in a shuffled order;
// an object shorter than its shape is refused naming it, as locally.
TEST_F(RemoteData, NpyRowsByRangesHoldTheLocalBytes) {
  constexpr int64_t kRows = 40;
  constexpr int64_t kRowBytes = 3000;
  const fs::path dir = rig_->dir() / "npy";
  fs::create_directories(dir);
  workloads::NpyWriter writer((dir / "rows.npy").string(), kRows, kRowBytes);
  for (int64_t i = 0; i < kRows; ++i) {
    const std::string row = TestBytes("row" + std::to_string(i), kRowBytes);
    writer.Add(std::as_bytes(std::span(row.data(), row.size())));
  }
  writer.Finish();
  std::ifstream in(dir / "rows.npy", std::ios::binary);
  std::string whole((std::istreambuf_iterator<char>(in)), {});
  fs::create_directories(dir / "cut");
  std::ofstream(dir / "cut" / "rows.npy", std::ios::binary) << whole.substr(0, whole.size() - 10);
  rig_->Put(dir / "cut", "s3://feedtune/npy-cut/");
  fs::remove_all(dir / "cut");
  rig_->Put(dir, "s3://feedtune/npy/");
  fs::copy_file(dir / "rows.npy", rig_->http_root() / "rows.npy");
  const workloads::NpyDataset local(Files((dir / "rows.npy").string()), NoCost(), CpuCalibration{});

  for (const std::string& path : {std::string("s3://feedtune/npy/rows.npy"), rig_->http_url() + "/rows.npy"}) {
    const workloads::RemoteNpyDataset remote(Files(path), NoCost(), CpuCalibration{}, rig_->env());
    ASSERT_EQ(remote.size(), kRows) << path;
    ASSERT_EQ(remote.max_sample_bytes(), kRowBytes) << path;
    EXPECT_TRUE(remote.reads_concurrently());
    for (int64_t i = 0; i < kRows; ++i) ASSERT_EQ(ReadOne(remote, i), ReadOne(local, i)) << path << " row " << i;
    std::vector<int64_t> order(kRows);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(11));
    for (const int concurrency : {1, 4, 16}) {
      std::vector<std::byte> slot(order.size() * kRowBytes);
      std::vector<int64_t> bytes(order.size());
      remote.ReadMany(order, slot, kRowBytes, concurrency, bytes);
      for (size_t i = 0; i < order.size(); ++i) {
        const std::vector<std::byte> want = ReadOne(local, order[i]);
        ASSERT_EQ(bytes[i], kRowBytes);
        ASSERT_TRUE(std::equal(want.begin(), want.end(), slot.begin() + static_cast<ptrdiff_t>(i * kRowBytes)))
            << path << ", concurrency " << concurrency << ", row " << order[i];
      }
    }
    // Every row read by a GET of its own is counted for the trial's store figures.
    const std::optional<loader::StoreReads> reads = remote.ReadsFromStore();
    ASSERT_TRUE(reads) << path;
    EXPECT_EQ(reads->objects, 4 * kRows + 1) << path;  // Read, ReadMany x3, and the header's GET
  }
  const std::string cut_says = "s3://feedtune/npy-cut/rows.npy: " + std::to_string(whole.size() - 10) +
                               " bytes, short of the " + std::to_string(whole.size());
  try {
    const workloads::RemoteNpyDataset cut(Files("s3://feedtune/npy-cut/rows.npy"), NoCost(), CpuCalibration{},
                                          rig_->env());
    FAIL() << "a cut .npy object opened";
  } catch (const workloads::DatasetCorrupt& e) {
    EXPECT_EQ(std::string(e.what()).rfind(cut_says, 0), 0u) << e.what();
  }
  EXPECT_THROW((void)workloads::RemoteLocationOf(workloads::WorkloadKind::kNpy, Files("s3://feedtune/npy/")),
               std::invalid_argument);
}

TEST_F(RemoteData, WhatIsNotThereIsNamed) {
  try {
    Remote("s3://feedtune/other/", ShardAccess::kRandom);
    FAIL() << "a prefix without shards opened";
  } catch (const workloads::DatasetNotFound& e) {
    EXPECT_NE(std::string(e.what()).find("s3://feedtune/other/: no *.tar objects under this prefix"),
              std::string::npos)
        << e.what();
  }
  try {
    Remote(rig_->http_url() + "/missing.tar", ShardAccess::kRandom);
    FAIL() << "a missing URL opened";
  } catch (const StorageError& e) {
    EXPECT_EQ(e.kind(), StorageError::Kind::kNotFound) << e.what();
    EXPECT_NE(std::string(e.what()).find("missing.tar"), std::string::npos) << e.what();
  }
  try {  // decode: jpeg over shards without JPEG members: named as locally
    RemoteTarDataset(Decoded("s3://feedtune/shards/"), FormatOptions{}, NoCost(), CpuCalibration{}, rig_->env());
    FAIL() << "shards without a JPEG member opened with decode: jpeg";
  } catch (const workloads::DatasetNotFound& e) {
    // The shards are indexed side by side: the first to fail names itself.
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("s3://feedtune/shards/data-", 0), 0u) << what;
    EXPECT_NE(what.find("' has no JPEG member (decode: jpeg reads the one named KEY.jpg"), std::string::npos) << what;
  }
  try {
    FilesOptions files = Decoded("s3://feedtune/other/");
    files.layout = workloads::FilesLayout::kFiles;
    workloads::RemoteDataset(files, NoCost(), CpuCalibration{}, rig_->env());
    FAIL() << "a prefix without JPEGs opened with decode: jpeg";
  } catch (const workloads::DatasetNotFound& e) {
    EXPECT_NE(std::string(e.what()).find("s3://feedtune/other/: no JPEG images under this prefix"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)workloads::RemoteLocationOf(workloads::WorkloadKind::kNpy, Files("s3://feedtune/shards/")),
               std::invalid_argument);
  EXPECT_THROW((void)workloads::RemoteLocationOf(workloads::WorkloadKind::kFiles, Files(rig_->http_url() + "/x")),
               std::invalid_argument);
}

}  // namespace
}  // namespace feedtune::storage::testing

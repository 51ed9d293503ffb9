// The file-backed dataset: round trips through both layouts and both I/O
// modes, every corruption case of the shard format, missing and empty
// directories, the cold-cache hook, and reading through the loader's workers.
#include "workloads/files_dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "loader/data_loader.h"
#include "loader/device/device.h"
#include "tuner/config/config.h"
#include "tuner/measure/measurer_factory.h"
#include "workloads/crc32c.h"
#include "workloads/synthetic_dataset.h"

namespace feedtune::workloads {
namespace {

namespace fs = std::filesystem;

// Sample i of the test datasets: a size that varies, content of (seed 5, i).
int64_t SizeOf(int64_t i) { return 100 + (i * 37) % 500; }

std::vector<std::byte> FileContent(int64_t i) {
  std::vector<std::byte> out(static_cast<size_t>(SizeOf(i)));
  SyntheticDataset::FillContent(5, i, out);
  return out;
}

class FilesDatasetTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("feedtune-files-" + std::to_string(getpid()) + "-" +
                                         testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(FilesLayout layout, int64_t samples, int64_t shard_bytes = 10000) {
    const std::string path = (dir_ / "data").string();
    DatasetWriter writer(path, layout, shard_bytes);
    for (int64_t i = 0; i < samples; ++i) writer.Add(FileContent(i));
    writer.Finish();
    return path;
  }

  static FilesDataset Open(const std::string& path, FilesLayout layout, FilesIo io = FilesIo::kPread,
                           CacheMode cache = CacheMode::kWarm) {
    SyntheticOptions cost;
    cost.cpu_us_per_sample = 0;
    return FilesDataset(FilesOptions{path, layout, io, cache}, cost, CpuCalibration{});
  }

  static std::string ReadError(const FilesDataset& d, int64_t index) {
    std::vector<std::byte> out(static_cast<size_t>(d.max_sample_bytes()));
    try {
      d.Read(index, out);
    } catch (const DatasetCorrupt& e) {
      return e.what();
    }
    return "no error";
  }

  template <typename F>
  static std::string OpenError(F open) {
    try {
      open();
    } catch (const DatasetNotFound& e) {
      return std::string("not found: ") + e.what();
    } catch (const DatasetCorrupt& e) {
      return std::string("corrupt: ") + e.what();
    }
    return "no error";
  }

  // Overwrites bytes of a file at `offset`.
  static void Poke(const std::string& path, uint64_t offset, const std::string& bytes) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  fs::path dir_;
};

void ExpectAllSamples(const FilesDataset& d, int64_t samples) {
  ASSERT_EQ(d.size(), samples);
  std::vector<std::byte> out(static_cast<size_t>(d.max_sample_bytes()));
  for (int64_t i = 0; i < samples; ++i) {
    const int64_t n = d.Read(i, out);
    ASSERT_EQ(n, SizeOf(i));
    const std::vector<std::byte> expected = FileContent(i);
    ASSERT_TRUE(std::equal(expected.begin(), expected.end(), out.begin())) << "sample " << i;
  }
}

TEST_F(FilesDatasetTest, ShardsRoundTripWithPreadAndMmap) {
  const std::string path = Write(FilesLayout::kShards, 200);
  EXPECT_GT(std::distance(fs::directory_iterator(path), fs::directory_iterator{}), 5);  // several shards
  for (FilesIo io : {FilesIo::kPread, FilesIo::kMmap}) {
    const FilesDataset d = Open(path, FilesLayout::kShards, io);
    EXPECT_EQ(d.max_sample_bytes(), 599);
    EXPECT_GT(d.file_count(), 5);
    ExpectAllSamples(d, 200);
  }
}

// workload.cpu_threads splits a file sample's CPU work as it does a
// synthetic one's (sample_cost.h): the reading thread pays its share, helpers
// the rest; the trial's worker_threads (SetIntraOpThreads) overrides it.
TEST_F(FilesDatasetTest, CpuWorkSplitsOverCpuThreads) {
  const std::string path = Write(FilesLayout::kShards, 8);
  const CpuCalibration calibration = Calibrate();
  const auto reader_cpu_us = [&](int cpu_threads) {
    SyntheticOptions cost;
    cost.cpu_us_per_sample = 8000;
    cost.cpu_threads = cpu_threads;
    cost.jitter = 0;
    const FilesDataset d(FilesOptions{path, FilesLayout::kShards, FilesIo::kPread, CacheMode::kWarm}, cost,
                         calibration);
    std::vector<std::byte> out(static_cast<size_t>(d.max_sample_bytes()));
    const int64_t t0 = ThreadCpuNs();
    for (int64_t i = 0; i < 8; ++i) d.Read(i, out);
    return static_cast<double>(ThreadCpuNs() - t0) / 1e3 / 8;
  };
  const double one = reader_cpu_us(1);
  const double four = reader_cpu_us(4);
  EXPECT_GE(one, 8000 * 0.8);
  // A quarter each, plus up to 200 us of spinning for the helpers.
  EXPECT_LE(four, 8000 * 0.5) << "one thread: " << one << " us";
  SetIntraOpThreads(1);  // the knob wins over workload.cpu_threads
  const double knob_one = reader_cpu_us(4);
  SetIntraOpThreads(0);
  EXPECT_GE(knob_one, 8000 * 0.8) << "four threads: " << four << " us";
}

TEST_F(FilesDatasetTest, ShardIndexDescribesEveryRecord) {
  const std::string path = Write(FilesLayout::kShards, 50);
  const ShardIndex index = ReadShardIndex(path);
  ASSERT_EQ(index.entries.size(), 50u);
  EXPECT_EQ(index.max_length, 599u);
  for (size_t i = 0; i < 50; ++i) {
    EXPECT_EQ(index.entries[i].length, static_cast<uint32_t>(SizeOf(static_cast<int64_t>(i))));
    EXPECT_EQ(index.entries[i].crc, Crc32c(FileContent(static_cast<int64_t>(i))));
  }
  EXPECT_EQ(index.entries[0].offset, kShardHeaderBytes);
  EXPECT_EQ(index.entries[1].offset, kShardHeaderBytes + kRecordHeaderBytes + 100);
}

TEST_F(FilesDatasetTest, OneFilePerSampleRoundTrip) {
  const std::string path = Write(FilesLayout::kFiles, 1200);
  EXPECT_TRUE(fs::exists(fs::path(path) / "00000" / "000000999.bin"));
  EXPECT_TRUE(fs::exists(fs::path(path) / "00001" / "000001000.bin"));
  for (FilesIo io : {FilesIo::kPread, FilesIo::kMmap}) {
    const FilesDataset d = Open(path, FilesLayout::kFiles, io);
    EXPECT_EQ(d.file_count(), 1200);
    ExpectAllSamples(d, 1200);
  }
}

TEST_F(FilesDatasetTest, FilesLayoutReadsAnyTreeAndSkipsDotFiles) {
  fs::create_directories(dir_ / "imgs" / "b");
  fs::create_directories(dir_ / "imgs" / ".cache");
  std::ofstream(dir_ / "imgs" / "b" / "2.jpg") << "bb";
  std::ofstream(dir_ / "imgs" / "a.jpg") << "a";
  std::ofstream(dir_ / "imgs" / ".DS_Store") << "junk";
  std::ofstream(dir_ / "imgs" / ".cache" / "x") << "junkjunk";
  const FilesDataset d = Open((dir_ / "imgs").string(), FilesLayout::kFiles);
  ASSERT_EQ(d.size(), 2);
  std::vector<std::byte> out(2);
  EXPECT_EQ(d.Read(0, out), 1);  // a.jpg sorts before b/2.jpg
  EXPECT_EQ(out[0], std::byte{'a'});
  EXPECT_EQ(d.Read(1, out), 2);
}

TEST_F(FilesDatasetTest, CorruptPayloadNamesFileRecordAndOffset) {
  const std::string path = Write(FilesLayout::kShards, 100);
  const ShardIndex index = ReadShardIndex(path);
  const IndexEntry& e = index.entries[42];
  int64_t in_shard = 0;
  for (int r = 0; r < 42; ++r) in_shard += index.entries[static_cast<size_t>(r)].shard == e.shard;
  Poke(index.shard_paths[e.shard], e.offset + kRecordHeaderBytes + 10, "\x01\x02");
  for (FilesIo io : {FilesIo::kPread, FilesIo::kMmap}) {
    const FilesDataset d = Open(path, FilesLayout::kShards, io);
    const std::string error = ReadError(d, 42);
    EXPECT_EQ(error.rfind(index.shard_paths[e.shard] + ": record 42 (record " + std::to_string(in_shard) +
                              " of this shard) at byte offset " + std::to_string(e.offset) +
                              ": corrupt: CRC32C of the payload is 0x",
                          0),
              0u)
        << error;
    EXPECT_NE(error.find("the record header says 0x"), std::string::npos) << error;
    EXPECT_EQ(ReadError(d, 41), "no error");  // the others are fine
    EXPECT_EQ(ReadError(d, 43), "no error");
  }
}

TEST_F(FilesDatasetTest, CorruptRecordHeader) {
  const std::string path = Write(FilesLayout::kShards, 20);
  const ShardIndex index = ReadShardIndex(path);
  const IndexEntry& e = index.entries[3];
  Poke(index.shard_paths[e.shard], e.offset, std::string("\x07\x00\x00\x00", 4));
  const FilesDataset d = Open(path, FilesLayout::kShards);
  EXPECT_EQ(ReadError(d, 3), index.shard_paths[e.shard] + ": record 3 (record 3 of this shard) at byte offset " +
                                 std::to_string(e.offset) + ": corrupt record header: length 7, the index says " +
                                 std::to_string(e.length));
}

TEST_F(FilesDatasetTest, TruncatedShardFailsAtOpenWithTheRecord) {
  const std::string path = Write(FilesLayout::kShards, 20, 1 << 20);  // one shard
  const ShardIndex index = ReadShardIndex(path);
  const IndexEntry& last = index.entries[19];
  fs::resize_file(index.shard_paths[0], last.offset + 50);
  EXPECT_EQ(OpenError([&] { Open(path, FilesLayout::kShards); }),
            "corrupt: " + index.shard_paths[0] + ": record 19 (record 19 of this shard) at byte offset " +
                std::to_string(last.offset) + " is truncated: it ends at byte " +
                std::to_string(last.offset + kRecordHeaderBytes + last.length) + ", the file at byte " +
                std::to_string(last.offset + 50));
}

TEST_F(FilesDatasetTest, TruncatedAfterOpeningFailsTheRead) {
  const std::string path = Write(FilesLayout::kShards, 20, 1 << 20);
  for (FilesIo io : {FilesIo::kPread, FilesIo::kMmap}) {
    const FilesDataset d = Open(path, FilesLayout::kShards, io);
    const ShardIndex index = ReadShardIndex(path);
    const IndexEntry& e = index.entries[10];
    fs::resize_file(index.shard_paths[0], e.offset + 20);
    EXPECT_EQ(ReadError(d, 10), index.shard_paths[0] + ": record 10 (record 10 of this shard) at byte offset " +
                                    std::to_string(e.offset) + ": truncated: the record ends at byte " +
                                    std::to_string(e.offset + kRecordHeaderBytes + e.length) +
                                    ", the file at byte " + std::to_string(e.offset + 20));
    fs::remove_all(path);
    Write(FilesLayout::kShards, 20, 1 << 20);
  }
  // One file per sample: a file that shrank.
  fs::remove_all(path);
  const std::string files = Write(FilesLayout::kFiles, 5);
  const FilesDataset d = Open(files, FilesLayout::kFiles);
  const std::string victim = (fs::path(files) / SampleFileName(2)).string();
  fs::resize_file(victim, 10);
  EXPECT_EQ(ReadError(d, 2), victim + " (sample 2): truncated since the dataset was opened: " +
                                 std::to_string(SizeOf(2)) + " bytes then, the file ends at byte offset 10");
}

TEST_F(FilesDatasetTest, DamagedIndex) {
  const std::string path = Write(FilesLayout::kShards, 10);
  const std::string index = (fs::path(path) / kIndexFileName).string();
  const std::string good = [&] {
    std::ifstream in(index, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  const auto restore = [&] { std::ofstream(index, std::ios::binary | std::ios::trunc) << good; };
  const auto open = [&] { Open(path, FilesLayout::kShards); };

  Poke(index, 0, "X");
  EXPECT_EQ(OpenError(open), "corrupt: " + index + ": not a feedtune index (bad magic at byte offset 0)");
  restore();
  Poke(index, 8, std::string("\x09\x00\x00\x00", 4));
  EXPECT_EQ(OpenError(open),
            "corrupt: " + index + ": format version 9, this feedtune reads version 1; regenerate the dataset");
  restore();
  Poke(index, kIndexHeaderBytes + 5 * kIndexEntryBytes + 4, "\x55");  // an entry's length
  EXPECT_EQ(OpenError(open).rfind("corrupt: " + index + ": index checksum mismatch (CRC32C 0x", 0), 0u);
  restore();
  fs::resize_file(index, good.size() - 30);
  EXPECT_EQ(OpenError(open), "corrupt: " + index + ": truncated or padded: " + std::to_string(good.size() - 30) +
                                 " bytes, the header promises 10 records (" + std::to_string(good.size()) + " bytes)");
  restore();
  fs::resize_file(index, 10);
  EXPECT_EQ(OpenError(open), "corrupt: " + index + ": truncated: 10 bytes, shorter than the header");
  restore();
  const std::string shard0 = (fs::path(path) / ShardFileName(0)).string();
  Poke(shard0, 0, "Z");
  EXPECT_EQ(OpenError(open), "corrupt: " + shard0 + ": not a feedtune shard (bad magic at byte offset 0)");
  fs::remove(shard0);
  EXPECT_EQ(OpenError(open).rfind("corrupt: " + shard0 + ": cannot open shard listed in the index: ", 0), 0u);
}

TEST_F(FilesDatasetTest, MissingOrEmptyDirectories) {
  const std::string missing = (dir_ / "nope").string();
  EXPECT_EQ(OpenError([&] { Open(missing, FilesLayout::kShards); }), "not found: " + missing + ": no such directory");
  EXPECT_EQ(OpenError([&] { Open(missing, FilesLayout::kFiles); }), "not found: " + missing + ": no such directory");
  const std::string empty = (dir_ / "empty").string();
  fs::create_directories(empty);
  EXPECT_EQ(OpenError([&] { Open(empty, FilesLayout::kShards); }), "not found: " + empty + ": the directory is empty");
  EXPECT_EQ(OpenError([&] { Open(empty, FilesLayout::kFiles); }),
            "not found: " + empty + ": no files in the directory (layout files reads every file under it)");
  std::ofstream(fs::path(empty) / "x.jpg") << "x";
  EXPECT_EQ(OpenError([&] { Open(empty, FilesLayout::kShards); }),
            "not found: " + empty + ": no index.ftidx, so not a sharded dataset");
}

TEST_F(FilesDatasetTest, ColdCacheEvictsAndSaysSo) {
  const std::string path = Write(FilesLayout::kShards, 100);
  const FilesDataset warm = Open(path, FilesLayout::kShards);
  EXPECT_EQ(warm.BeforeRepeat().note, "");
  EXPECT_FALSE(warm.BeforeRepeat().resident_fraction.has_value());
  const FilesDataset cold = Open(path, FilesLayout::kShards, FilesIo::kPread, CacheMode::kCold);
  const loader::RepeatPreparation prep = cold.BeforeRepeat();
  const std::string& note = prep.note;
  ASSERT_TRUE(prep.resident_fraction.has_value());  // counted, as a number beside the words
  EXPECT_GE(*prep.resident_fraction, 0.0);
  EXPECT_LE(*prep.resident_fraction, 1.0);
  EXPECT_EQ(note.rfind("cache cold: 0.0 MB in " + std::to_string(cold.file_count()) +
                           " files evicted from the page cache before each repeat (posix_fadvise DONTNEED); ",
                       0),
            0u)
      << note;
  EXPECT_NE(note.find("stayed resident"), std::string::npos) << note;
  ExpectAllSamples(cold, 100);  // still reads right after an eviction

  const std::string files = (dir_ / "files").string();
  {
    DatasetWriter writer(files, FilesLayout::kFiles, 0);
    for (int64_t i = 0; i < 20; ++i) writer.Add(FileContent(i));
    writer.Finish();
  }
  const FilesDataset cold_files = Open(files, FilesLayout::kFiles, FilesIo::kMmap, CacheMode::kCold);
  EXPECT_NE(cold_files.BeforeRepeat().note.find("20 files evicted"), std::string::npos);
}

TEST_F(FilesDatasetTest, WorkerProcessesReadEverySampleRight) {
  const std::string path = Write(FilesLayout::kShards, 64);
  SyntheticOptions cost;
  cost.cpu_us_per_sample = 0;
  auto dataset = std::make_shared<FilesDataset>(
      FilesOptions{path, FilesLayout::kShards, FilesIo::kPread, CacheMode::kWarm}, cost, CpuCalibration{});
  loader::LoaderOptions options;
  options.knobs.batch_size = 8;
  options.knobs.num_workers = 2;
  options.shuffle = true;
  loader::DataLoader data_loader(dataset, options);
  data_loader.StartEpoch(0);
  int64_t seen = 0;
  while (auto batch = data_loader.Next()) {
    for (size_t i = 0; i < batch->sample_indices.size(); ++i) {
      const int64_t index = batch->sample_indices[i];
      const std::vector<std::byte> expected = FileContent(index);
      const std::byte* got = batch->data.data() + static_cast<int64_t>(i) * batch->stride;
      ASSERT_TRUE(std::equal(expected.begin(), expected.end(), got)) << index;
      ++seen;
    }
  }
  EXPECT_EQ(seen, 64);
}

TEST_F(FilesDatasetTest, WriterRefusesANonEmptyDirectory) {
  fs::create_directories(dir_ / "full");
  std::ofstream(dir_ / "full" / "x") << "x";
  try {
    DatasetWriter writer((dir_ / "full").string(), FilesLayout::kShards, 1000);
    FAIL() << "accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              (dir_ / "full").string() + ": exists and is not an empty directory; choose another --out or remove it");
  }
}

// The measurer factory: a missing dataset is the user's mistake (WorkloadError,
// exit 2); a cold-cache trial measures MB/s and says it evicted.
TEST_F(FilesDatasetTest, OpenWorkloadForFiles) {
  std::string note;
  device::DeviceOptions device_options;
  device_options.backend = device::BackendChoice::kHostSim;
  auto device = device::CreateDevice(device_options, &note);
  tuner::SweepConfig config =
      tuner::ParseConfig("workload: {kind: files, path: " + (dir_ / "none").string() + "}\n", "f.yaml");
  try {
    tuner::OpenWorkload(config);
    FAIL() << "opened";
  } catch (const tuner::WorkloadError& e) {
    EXPECT_EQ(std::string(e.what()), "f.yaml: workload.path: " + (dir_ / "none").string() +
                                         ": no such directory (make a dataset with `feedtune gen-data --out " +
                                         (dir_ / "none").string() + " --layout shards ...`)");
  }

  config.workload.files.path = Write(FilesLayout::kShards, 256, 20000);
  config.workload.files.cache = CacheMode::kCold;
  config.workload.synthetic.cpu_us_per_sample = 10;
  config.loader.knobs.batch_size = 16;
  config.device.step_us = 100;
  config.sweep.repeats = 2;
  config.sweep.warmup_batches = 2;
  config.sweep.measure_seconds = 0.1;
  tuner::OpenedWorkload opened = tuner::OpenWorkload(config);
  ASSERT_TRUE(opened.cpu_calibration.has_value());
  EXPECT_GT(opened.cpu_calibration->work_bytes_per_s, 0);
  EXPECT_EQ(opened.cpu_calibration->clock, "CLOCK_THREAD_CPUTIME_ID");
  EXPECT_NE(opened.description.find("256 samples"), std::string::npos) << opened.description;
  ASSERT_NE(opened.fork_server, nullptr);  // process mode, the default
  const auto measurer = tuner::MakeMeasurer(config, opened, *device, nullptr);
  config.loader.knobs.num_workers = 2;
  const results::TrialRecord trial = measurer->Measure(config.loader.knobs);
  ASSERT_EQ(trial.status, results::TrialStatus::kOk) << trial.error.value_or("");
  EXPECT_GT(trial.samples_per_s, 0);
  EXPECT_GT(trial.mb_per_s, 0);
  EXPECT_NE(measurer->last_warning().find("cache cold"), std::string::npos) << measurer->last_warning();
}

}  // namespace
}  // namespace feedtune::workloads

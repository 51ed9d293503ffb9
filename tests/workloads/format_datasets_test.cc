// The format datasets (npy, hdf5, lmdb): each returns exactly the bytes
// gen-data's writers stored; hostile inputs fail at open with the file named
// (and, through OpenWorkload, as a WorkloadError: exit 2); HDF5 and LMDB
// handles are not held by the process that forks the workers, and many worker
// processes over one file read every sample right.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <lmdb.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "loader/data_loader.h"
#include "loader/fork_server.h"
#include "tests/common/run_feedtune.h"
#include "tuner/config/config.h"
#include "tuner/measure/measurer_factory.h"
#include "workloads/format_inspect.h"
#include "workloads/format_io.h"
#include "workloads/hdf5_dataset.h"
#include "workloads/lmdb_dataset.h"
#include "workloads/npy_dataset.h"
#include "workloads/npy_format.h"
#include "workloads/shard_format.h"
#include "workloads/synthetic_dataset.h"

namespace feedtune::workloads {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kFormatSeed = 7;

std::vector<std::byte> FormatContent(int64_t i, int64_t bytes) {
  std::vector<std::byte> out(static_cast<size_t>(bytes));
  SyntheticDataset::FillContent(kFormatSeed, i, out);
  return out;
}

SyntheticOptions FormatNoCost() {
  SyntheticOptions cost;
  cost.cpu_us_per_sample = 0;
  return cost;
}

// Open file descriptors of this process that point at `path`.
int FdsOpenOn(const std::string& path) {
  const std::string target = fs::canonical(path).string();
  int count = 0;
  for (const auto& entry : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const fs::path link = fs::read_symlink(entry.path(), ec);
    if (!ec && link.string().starts_with(target)) ++count;
  }
  return count;
}

class FormatDatasetsTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("feedtune-formats-" + std::to_string(getpid()) + "-" +
                                         testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string WriteNpy(int64_t samples, int64_t bytes) {
    const std::string path = (dir_ / "a.npy").string();
    NpyWriter writer(path, samples, bytes);
    for (int64_t i = 0; i < samples; ++i) writer.Add(FormatContent(i, bytes));
    writer.Finish();
    return path;
  }
  std::string WriteHdf5(int64_t samples, int64_t bytes, int64_t chunk, int gzip, const std::string& name = "a.h5") {
    const std::string path = (dir_ / name).string();
    Hdf5Writer writer(path, samples, bytes, chunk, gzip);
    for (int64_t i = 0; i < samples; ++i) writer.Add(FormatContent(i, bytes));
    writer.Finish();
    return path;
  }
  std::string WriteLmdb(int64_t samples, int64_t bytes) {
    const std::string path = (dir_ / "a.lmdb").string();
    LmdbWriter writer(path, samples, bytes);
    for (int64_t i = 0; i < samples; ++i) writer.Add(FormatContent(i, bytes));
    writer.Finish();
    return path;
  }
  std::string WriteText(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
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

  // Every sample through `workers` worker processes started by a fork server,
  // in shuffled order, checked against `expected(i)`.
  template <typename Expected>
  static void ReadAllThroughWorkers(const std::shared_ptr<const loader::Dataset>& dataset, int workers,
                                    Expected expected) {
    auto server = std::make_shared<loader::ForkServer>(dataset);
    loader::LoaderOptions options;
    options.knobs.batch_size = 8;
    options.knobs.num_workers = workers;
    options.drop_last = false;
    options.shuffle = true;
    loader::DataLoader data_loader(dataset, options, nullptr, server);
    for (int epoch = 0; epoch < 2; ++epoch) {  // the second epoch starts new workers
      data_loader.StartEpoch(epoch);
      std::vector<int> seen(static_cast<size_t>(dataset->size()));
      while (auto batch = data_loader.Next()) {
        for (size_t i = 0; i < batch->sample_indices.size(); ++i) {
          const int64_t index = batch->sample_indices[i];
          const std::vector<std::byte> want = expected(index);
          const std::byte* got = batch->data.data() + static_cast<int64_t>(i) * batch->stride;
          ASSERT_TRUE(std::equal(want.begin(), want.end(), got)) << "sample " << index;
          ++seen[static_cast<size_t>(index)];
        }
      }
      for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "sample " << i << " epoch " << epoch;
    }
  }

  fs::path dir_;
};

// ---------------------------------------------------------------------------
// npy

TEST_F(FormatDatasetsTest, NpyReturnsGenDataBytesWithPreadAndMmap) {
  const std::string path = WriteNpy(50, 1000);
  for (FilesIo io : {FilesIo::kPread, FilesIo::kMmap}) {
    NpyDataset dataset(FilesOptions{path, FilesLayout::kShards, io, CacheMode::kWarm}, FormatNoCost(), CpuCalibration{});
    ASSERT_EQ(dataset.size(), 50);
    ASSERT_EQ(dataset.max_sample_bytes(), 1000);
    EXPECT_EQ(dataset.header().data_offset % 64, 0);  // aligned as numpy aligns
    std::vector<std::byte> out(1000);
    for (int64_t i = 0; i < 50; ++i) {
      ASSERT_EQ(dataset.Read(i, out), 1000);
      ASSERT_EQ(out, FormatContent(i, 1000)) << i;
    }
  }
}

TEST_F(FormatDatasetsTest, NpyHeaderVersionsAndDtypes) {
  const auto header = [](int major, const std::string& dict) {
    std::string text = std::string(kNpyMagic, 6) + static_cast<char>(major) + '\0';
    const size_t length = dict.size();
    text += static_cast<char>(length & 0xff);
    text += static_cast<char>((length >> 8) & 0xff);
    if (major >= 2) text += std::string("\0\0", 2);
    return text + dict;
  };
  const auto parse = [](const std::string& bytes) {
    return ParseNpyHeader(std::as_bytes(std::span(bytes.data(), bytes.size())), "x.npy");
  };
  const std::string v1 = "{'descr': '<f4', 'fortran_order': False, 'shape': (10, 3, 4), }    \n";
  NpyHeader h = parse(header(1, v1));
  EXPECT_EQ(h.samples, 10);
  EXPECT_EQ(h.sample_bytes, 48);
  EXPECT_EQ(h.data_offset, static_cast<int64_t>(10 + v1.size()));
  const std::string v2 = "{\"shape\": (7,), \"fortran_order\": True, \"descr\": \"<U3\"}\n";
  h = parse(header(2, v2));  // 1-d: the order is moot
  EXPECT_EQ(h.data_offset, static_cast<int64_t>(12 + v2.size()));
  EXPECT_EQ(h.sample_bytes, 12);  // UCS-4
  EXPECT_EQ(h.ShapeText(), "(7,)");
  h = parse(header(3, "{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (5L, 2L)}\n"));
  EXPECT_EQ(h.sample_bytes, 16);
  EXPECT_EQ(parse(header(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3, 3), }\n")).sample_bytes, 3);

  const auto error = [&](const std::string& bytes) {
    try {
      parse(bytes);
    } catch (const DatasetCorrupt& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("NUMPY"), "x.npy: not a valid .npy file: the file is shorter than the .npy magic");
  EXPECT_EQ(error("PK\x03\x04xxxxxxxxxx"),
            "x.npy: not a valid .npy file: the file does not start with the .npy magic \"\\x93NUMPY\"");
  EXPECT_EQ(error(header(4, "{}")), "x.npy: not a valid .npy file: format version 4.0 (feedtune reads 1.0, 2.0 and 3.0)");
  EXPECT_EQ(error(header(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (10, 3), }").substr(0, 30)),
            "x.npy: not a valid .npy file: the file ends inside the header (70 bytes announced, 30 present)");
  EXPECT_EQ(error(header(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}")),
            "x.npy: not a valid .npy file: header has an unknown key 'x' (expected descr, fortran_order, shape) "
            "at byte 68");
  EXPECT_EQ(error(header(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3)}")),
            "x.npy: not a valid .npy file: Fortran order: a sample is not contiguous; save it in C order "
            "(np.ascontiguousarray)");
  EXPECT_EQ(error(header(1, "{'descr': '<f4', 'fortran_order': False, 'shape': ()}")),
            "x.npy: not a valid .npy file: a 0-d array (shape ()) has no samples along axis 0");
  EXPECT_EQ(error(header(1, "{'descr': '|O', 'fortran_order': False, 'shape': (2,)}")),
            "x.npy: not a valid .npy file: dtype '|O' holds Python objects (pickled), which have no fixed size: "
            "save a numeric array");
  EXPECT_EQ(error(header(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}")),
            "x.npy: not a valid .npy file: a structured dtype (a list descr): feedtune reads arrays of one plain "
            "dtype");
  EXPECT_EQ(error(header(1, "{'descr': '<f4', 'fortran_order': False}")),
            "x.npy: not a valid .npy file: the header lacks the key 'shape'");
  EXPECT_EQ(error(header(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}")),
            "x.npy: not a valid .npy file: header repeats the key 'descr' at byte 27");
  EXPECT_NE(error(header(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999, 9999999)}"))
                .find("too large"),
            std::string::npos);
  EXPECT_NE(error(header(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000, 100000)}"))
                .find("is larger than 1073741824 bytes"),
            std::string::npos);
}

TEST_F(FormatDatasetsTest, NpyShapeLargerThanTheFileFailsAtOpen) {
  const std::string path = WriteNpy(20, 100);
  fs::resize_file(path, fs::file_size(path) - 1);
  EXPECT_EQ(OpenError([&] { NpyDataset d(FilesOptions{path}, FormatNoCost(), CpuCalibration{}); }),
            "corrupt: " + path + ": shape (20, 100) of dtype '|u1' needs 2000 bytes after the 128-byte header, "
            "the file has 1999: it is truncated, or its header announces more rows than were written");
  EXPECT_EQ(OpenError([&] { NpyDataset d(FilesOptions{(dir_ / "none.npy").string()}, FormatNoCost(), CpuCalibration{}); }),
            "not found: " + (dir_ / "none.npy").string() + ": cannot open: No such file or directory");

  // Through OpenWorkload: the user's input, a WorkloadError (exit 2) naming config, key and file.
  const std::string bad = WriteText("bad.npy", std::string("\x93NUMPY\x01\x00\x05\x00{'de}", 15));
  tuner::SweepConfig config = tuner::ParseConfig("workload: {kind: npy, path: " + bad + "}\n", "n.yaml");
  try {
    tuner::OpenWorkload(config);
    FAIL() << "opened";
  } catch (const tuner::WorkloadError& e) {
    EXPECT_EQ(std::string(e.what()), "n.yaml: workload.path: " + bad +
                                         ": not a valid .npy file: header unterminated a key in quotes at byte 15");
  }
}

// ---------------------------------------------------------------------------
// hdf5

TEST_F(FormatDatasetsTest, Hdf5ReturnsGenDataBytesAndLabels) {
  for (const auto& [chunk, gzip] : {std::pair{1, -1}, std::pair{7, 4}}) {
    SCOPED_TRACE(chunk);
    const std::string path = WriteHdf5(40, 300, chunk, gzip, "c" + std::to_string(chunk) + ".h5");
    FormatOptions format;
    format.labels = "/labels";
    Hdf5Dataset dataset(FilesOptions{path}, format, FormatNoCost(), CpuCalibration{});
    ASSERT_EQ(dataset.size(), 40);
    ASSERT_EQ(dataset.max_sample_bytes(), 308);
    EXPECT_EQ(dataset.images().chunk_rows(), chunk);
    EXPECT_EQ(dataset.images().filters, gzip < 0 ? std::vector<std::string>{} : std::vector<std::string>{"gzip(4)"});
    std::vector<std::byte> out(308);
    for (int64_t i = 39; i >= 0; --i) {
      ASSERT_EQ(dataset.Read(i, out), 308);
      const std::vector<std::byte> want = FormatContent(i, 300);
      ASSERT_TRUE(std::equal(want.begin(), want.end(), out.begin())) << i;
      int64_t label = -1;
      std::memcpy(&label, out.data() + 300, 8);
      ASSERT_EQ(label, Hdf5Writer::Label(i));
    }
  }
}

TEST_F(FormatDatasetsTest, Hdf5HostileFiles) {
  const std::string path = WriteHdf5(100, 1000, 10, -1);
  FormatOptions format;
  format.dataset = "/imgs";
  EXPECT_EQ(OpenError([&] { Hdf5Dataset d(FilesOptions{path}, format, FormatNoCost(), CpuCalibration{}); }),
            "not found: " + path + ": no dataset '/imgs' in the file; it holds /images, /labels (set workload.dataset)");

  // Truncated: HDF5 finds the end of file short of what the superblock says.
  const std::string truncated = (dir_ / "t.h5").string();
  fs::copy_file(path, truncated);
  fs::resize_file(truncated, fs::file_size(truncated) / 2);
  const std::string error =
      OpenError([&] { Hdf5Dataset d(FilesOptions{truncated}, FormatOptions{}, FormatNoCost(), CpuCalibration{}); });
  EXPECT_TRUE(error.starts_with("corrupt: " + truncated + ": cannot open as HDF5 (HDF5: ")) << error;
  EXPECT_NE(error.find("truncated"), std::string::npos) << error;

  const std::string text = WriteText("x.h5", "not hdf5 at all");
  EXPECT_EQ(OpenError([&] { Hdf5Dataset d(FilesOptions{text}, FormatOptions{}, FormatNoCost(), CpuCalibration{}); }),
            "not found: " + text + ": not an HDF5 file (no HDF5 signature)");

  // A scalar dataset (rank 0), written with the library directly.
  const std::string scalar = (dir_ / "s.h5").string();
  {
    const hid_t file = H5Fcreate(scalar.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t dataset = H5Dcreate2(file, "/x", H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const int32_t value = 3;
    H5Dwrite(dataset, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, &value);
    H5Dclose(dataset);
    H5Sclose(space);
    H5Fclose(file);
  }
  format.dataset = "/x";
  EXPECT_EQ(OpenError([&] { Hdf5Dataset d(FilesOptions{scalar}, format, FormatNoCost(), CpuCalibration{}); }),
            "corrupt: " + scalar + ": dataset '/x' (workload.dataset) is a scalar (rank 0): it has no axis 0 to "
            "take samples along");
  EXPECT_EQ(Hdf5Dataset::OpenObjectsInThisProcess(), 0);  // every failed open closed what it had opened
}

// The fork-after-open trap cannot be reached: opening the workload leaves no
// HDF5 object and no descriptor of the file in this process (so none in the
// fork server, forked from it), and four worker processes over one file, in
// two epochs, read every sample right.
TEST_F(FormatDatasetsTest, Hdf5OpenedOnlyInTheWorkers) {
  const std::string path = WriteHdf5(300, 2000, 16, 1);
  tuner::SweepConfig config =
      tuner::ParseConfig("workload: {kind: hdf5, path: " + path + ", labels: /labels, cpu_us_per_sample: 0}\n", "h.yaml");
  const tuner::OpenedWorkload opened = tuner::OpenWorkload(config);
  ASSERT_NE(opened.fork_server, nullptr);
  EXPECT_NE(opened.description.find("opened in each worker after fork"), std::string::npos) << opened.description;
  EXPECT_EQ(Hdf5Dataset::OpenObjectsInThisProcess(), 0);
  EXPECT_EQ(FdsOpenOn(path), 0);
  ReadAllThroughWorkers(opened.dataset, 4, [](int64_t i) {
    std::vector<std::byte> want = FormatContent(i, 2000);
    const int64_t label = Hdf5Writer::Label(i);
    const auto* bytes = reinterpret_cast<const std::byte*>(&label);
    want.insert(want.end(), bytes, bytes + 8);
    return want;
  });
  EXPECT_EQ(Hdf5Dataset::OpenObjectsInThisProcess(), 0);  // the workers opened their own
  EXPECT_EQ(FdsOpenOn(path), 0);
}

// ---------------------------------------------------------------------------
// lmdb

TEST_F(FormatDatasetsTest, LmdbReturnsGenDataBytesAndWorkersReadEverySample) {
  const std::string path = WriteLmdb(200, 700);
  tuner::SweepConfig config =
      tuner::ParseConfig("workload: {kind: lmdb, path: " + path + ", cpu_us_per_sample: 0}\n", "l.yaml");
  const tuner::OpenedWorkload opened = tuner::OpenWorkload(config);
  const auto& dataset = dynamic_cast<const LmdbDataset&>(opened.stages->inner());
  EXPECT_TRUE(dataset.info().gen_data_keys);
  EXPECT_EQ(dataset.size(), 200);
  EXPECT_EQ(dataset.KeyOf(12), "000000012");
  EXPECT_EQ(FdsOpenOn(path), 0);  // checked and closed: the fork server holds no environment
  ReadAllThroughWorkers(opened.dataset, 4, [](int64_t i) { return FormatContent(i, 700); });
  EXPECT_EQ(FdsOpenOn(path), 0);
  // And in this process, which opens its own on the first read.
  std::vector<std::byte> out(700);
  ASSERT_EQ(dataset.Read(199, out), 700);
  EXPECT_EQ(out, FormatContent(199, 700));
}

// cache: cold evicts data.mdb even after this process has read from it (its
// own map, which would pin the pages, is dropped first and reopened on the
// next read).
TEST_F(FormatDatasetsTest, LmdbColdCacheEvictsAfterReads) {
  const std::string path = WriteLmdb(100, 20000);
  FilesOptions files{path};
  files.cache = CacheMode::kCold;
  LmdbDataset dataset(files, FormatOptions{}, FormatNoCost(), CpuCalibration{});
  std::vector<std::byte> out(20000);
  for (int64_t i = 0; i < 100; ++i) ASSERT_EQ(dataset.Read(i, out), 20000);
  const loader::RepeatPreparation prep = dataset.BeforeRepeat();
  const std::string& note = prep.note;
  bool network = false;
  if (FileSystemType(path, &network) == "tmpfs") GTEST_SKIP() << "tmpfs cannot evict: " << note;
  EXPECT_NE(note.find("; 0% stayed resident"), std::string::npos) << note;
  ASSERT_TRUE(prep.resident_fraction.has_value()) << note;  // the same, as the number `feedtune layout` decides on
  EXPECT_LT(*prep.resident_fraction, 0.005) << note;
  ASSERT_EQ(dataset.Read(7, out), 20000);  // reopened
  EXPECT_EQ(out, FormatContent(7, 20000));
}

// A user's environment: any keys, values of any size, indexed by a cursor
// walk in key order; given as its directory or as its data file.
TEST_F(FormatDatasetsTest, LmdbUserEnvironmentIsIndexedByACursorWalk) {
  const std::string path = (dir_ / "user").string();
  fs::create_directories(path);
  {
    MDB_env* env = nullptr;
    ASSERT_EQ(mdb_env_create(&env), 0);
    ASSERT_EQ(mdb_env_set_mapsize(env, 16 << 20), 0);
    ASSERT_EQ(mdb_env_open(env, path.c_str(), 0, 0644), 0);
    MDB_txn* txn = nullptr;
    MDB_dbi dbi = 0;
    ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
    ASSERT_EQ(mdb_dbi_open(txn, nullptr, 0, &dbi), 0);
    for (const std::string name : {"zebra", "apple", "mango"}) {
      std::string value = name + std::string(name.size() * 100, '!');
      MDB_val key{name.size(), const_cast<char*>(name.data())};
      MDB_val data{value.size(), value.data()};
      ASSERT_EQ(mdb_put(txn, dbi, &key, &data, 0), 0);
    }
    ASSERT_EQ(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
  }
  for (const std::string& where : std::vector<std::string>{path, path + "/data.mdb"}) {
    LmdbDataset dataset(FilesOptions{where}, FormatOptions{}, FormatNoCost(), CpuCalibration{});
    ASSERT_EQ(dataset.size(), 3);
    EXPECT_FALSE(dataset.info().gen_data_keys);
    EXPECT_EQ(dataset.max_sample_bytes(), 505);
    EXPECT_EQ(dataset.info().min_value_bytes, 505);
    EXPECT_EQ(dataset.KeyOf(0), "apple");
    EXPECT_EQ(dataset.KeyOf(2), "zebra");
    std::vector<std::byte> out(505);
    ASSERT_EQ(dataset.Read(1, out), 505);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(out.data()), 5), "mango");
  }
}

// The VmFlags of this process's mapping of `file` in /proc/self/smaps ("" when
// it is not mapped): "rr" is the kernel's mark of MADV_RANDOM (no readahead).
std::string VmFlagsOfMapping(const std::string& file) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_mapping = false;
  while (std::getline(smaps, line)) {
    if (line.ends_with(" " + file)) in_mapping = true;
    if (in_mapping && line.starts_with("VmFlags:")) return line;
  }
  return "";
}

// lmdb.readahead reaches liblmdb: off (the default) opens with MDB_NORDAHEAD,
// which advises the map MADV_RANDOM, as the kernel shows in smaps; on leaves
// the kernel's readahead. The key is read from the config.
TEST_F(FormatDatasetsTest, LmdbReadaheadKeyIsHonoured) {
  const std::string path = WriteLmdb(20, 5000);
  const std::string data = fs::canonical(path + "/data.mdb").string();
  std::vector<std::byte> out(5000);
  for (const bool readahead : {false, true}) {
    SCOPED_TRACE(readahead ? "readahead: true" : "readahead: false");
    tuner::SweepConfig config = tuner::ParseConfig(
        "workload: {kind: lmdb, path: " + path + ", lmdb: {readahead: " + (readahead ? "true" : "false") + "}}\n",
        "l.yaml");
    const tuner::OpenedWorkload opened = tuner::OpenWorkload(config);
    const auto& dataset = dynamic_cast<const LmdbDataset&>(opened.stages->inner());
    EXPECT_NE(dataset.Describe().find(readahead ? ", readahead on" : " | MDB_NORDAHEAD"), std::string::npos)
        << dataset.Describe();
    EXPECT_EQ(VmFlagsOfMapping(data), "");  // opened only to check and index: nothing mapped before the workers
    ASSERT_EQ(dataset.Read(3, out), 5000);  // this process maps its own environment now
    EXPECT_EQ(out, FormatContent(3, 5000));
    const std::string flags = VmFlagsOfMapping(data);
    ASSERT_NE(flags, "") << data << " is not mapped";
    EXPECT_EQ(flags.find(" rr") != std::string::npos, !readahead) << flags;
  }
}

TEST_F(FormatDatasetsTest, LmdbNotAnEnvironment) {
  const std::string empty = (dir_ / "empty").string();
  fs::create_directories(empty);
  EXPECT_EQ(OpenError([&] { LmdbDataset d(FilesOptions{empty}, FormatOptions{}, FormatNoCost(), CpuCalibration{}); }),
            "not found: " + empty + ": not an LMDB environment (no data.mdb in the directory)");
  const std::string junk = (dir_ / "junk").string();
  fs::create_directories(junk);
  std::ofstream(junk + "/data.mdb", std::ios::binary) << std::string(20000, 'x');
  EXPECT_EQ(OpenError([&] { LmdbDataset d(FilesOptions{junk}, FormatOptions{}, FormatNoCost(), CpuCalibration{}); }),
            "not found: " + junk + ": not an LMDB environment (" + junk +
                "/data.mdb: MDB_INVALID: File is not an LMDB file)");
  tuner::SweepConfig config = tuner::ParseConfig("workload: {kind: lmdb, path: " + junk + "}\n", "l.yaml");
  EXPECT_THROW(tuner::OpenWorkload(config), tuner::WorkloadError);
}

// ---------------------------------------------------------------------------
// gen-data and trials through the binary.

TEST_F(FormatDatasetsTest, GenDataAndTrialForEachFormat) {
  using testing_util::RunFeedtune;
  for (const std::string kind : {"npy", "hdf5", "lmdb"}) {
    SCOPED_TRACE(kind);
    const std::string data = (dir_ / ("data-" + kind)).string();
    std::string gen = "gen-data -q --layout " + kind + " --out " + data + " --samples 300 --sample-bytes 3000";
    if (kind == "hdf5") gen += " --chunk-samples 4 --compression gzip:1";
    auto r = RunFeedtune(gen, dir_);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("wrote 300 samples of 3000 bytes"), std::string::npos) << r.out;
    r = RunFeedtune(gen, dir_);  // exists: refused
    EXPECT_EQ(r.code, 2) << r.err;
    const std::string config = WriteText(kind + ".yaml", "name: f\nworkload: {kind: " + kind + ", path: " + data +
                                                             ", cpu_us_per_sample: 0}\nloader: {batch_size: 10}\n"
                                                             "device: {backend: host-sim, step_us: 50}\n"
                                                             "sweep: {measure_seconds: 0.1, warmup_batches: 1}\n");
    r = RunFeedtune("trial " + config + " --set loader.num_workers=2", dir_);
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("samples/s"), std::string::npos) << r.out;
  }
  auto r = RunFeedtune("gen-data --layout npy --out x.npy --samples 10 --sample-bytes 10 --chunk-samples 2", dir_);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--chunk-samples and --compression are for --layout hdf5"), std::string::npos) << r.err;
  r = RunFeedtune("gen-data --layout hdf5 --out x.h5 --samples 10 --sample-bytes 10 --compression gzip:0", dir_);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("expected none or gzip:N with N in 1-9, got 'gzip:0'"), std::string::npos) << r.err;
  r = RunFeedtune("gen-data --layout npy --out big.npy --samples 100000000 --sample-bytes 1073741824", dir_);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("free on that file system"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "big.npy"));
  // A bad file is exit 2 before any trial.
  const std::string bad = WriteText("bad.npy", std::string("\x93NUMPY\x01\x00\x05\x00{'de}", 15));
  const std::string config = WriteText("bad.yaml", "workload: {kind: npy, path: " + bad + "}\n");
  r = RunFeedtune("trial " + config, dir_);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(bad + ": not a valid .npy file"), std::string::npos) << r.err;
}

// gen-data --jpeg writes shards of JPEGs (the "data" feature of each TFRecord
// Example, KEY.jpg in each tar sample) that a trial with decode: jpeg decodes:
// each sample arrives as the default 224x224 RGB crop, not the 2-3 KB JPEG.
TEST_F(FormatDatasetsTest, GenDataJpegShardsDecodeThroughTheBinary) {
  using testing_util::RunFeedtune;
  for (const std::string kind : {"tfrecord", "tar"}) {
    SCOPED_TRACE(kind);
    const std::string data = (dir_ / ("jpeg-" + kind)).string();
    auto r = RunFeedtune("gen-data -q --layout " + kind + " --jpeg --out " + data +
                             " --samples 40 --image-size 64x48 --shards 2",
                         dir_);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("wrote 40 JPEG images of 64x48"), std::string::npos) << r.out;
    const std::string feature = kind == "tfrecord" ? ", feature: data" : "";
    const std::string config =
        WriteText("jpeg-" + kind + ".yaml", "name: j\nworkload: {kind: " + kind + ", path: " + data + feature +
                                                ", decode: jpeg, cpu_us_per_sample: 0}\nloader: {batch_size: 8}\n"
                                                "device: {backend: host-sim, step_us: 50}\n"
                                                "sweep: {measure_seconds: 0.1, warmup_batches: 1}\n");
    r = RunFeedtune("trial " + config + " --set loader.num_workers=1 --json", dir_);
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    const nlohmann::json t = nlohmann::json::parse(r.out);
    ASSERT_EQ(t["status"], "ok") << r.out;
    const double bytes_per_sample = t["mb_per_s"].get<double>() * 1e6 / t["samples_per_s"].get<double>();
    EXPECT_NEAR(bytes_per_sample, 224 * 224 * 3, 224 * 224 * 3 * 0.005) << r.out;
    // Cold, the eviction's residency comes as a number beside its words (for `feedtune layout`); warm, null.
    EXPECT_TRUE(t["cache_resident_fraction"].is_null()) << r.out;
    r = RunFeedtune("trial " + config + " --set loader.num_workers=1 --set workload.cache=cold --json", dir_);
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    const nlohmann::json cold = nlohmann::json::parse(r.out);
    ASSERT_TRUE(cold["cache_resident_fraction"].is_number()) << r.out;
    EXPECT_GE(cold["cache_resident_fraction"].get<double>(), 0.0);
    EXPECT_LE(cold["cache_resident_fraction"].get<double>(), 1.0);
    EXPECT_NE(cold["warning"].get<std::string>().find("stayed resident"), std::string::npos) << r.out;
  }
}

// Each hostile file the issue lists is refused at config time through the
// binary (exit 2, before any trial), with the file named and the reason.
TEST_F(FormatDatasetsTest, HostileFormatFilesExit2BeforeAnyTrial) {
  using testing_util::RunFeedtune;
  const std::string h5 = WriteHdf5(40, 500, 1, -1);
  const std::string truncated = (dir_ / "t.h5").string();
  fs::copy_file(h5, truncated);
  fs::resize_file(truncated, fs::file_size(truncated) / 2);
  const std::string junk = (dir_ / "junk").string();
  fs::create_directories(junk);
  std::ofstream(junk + "/data.mdb", std::ios::binary) << std::string(20000, 'x');
  const std::string npy = WriteNpy(10, 100);
  fs::resize_file(npy, fs::file_size(npy) - 50);
  struct Case {
    std::string workload, error;
  };
  const std::vector<Case> cases = {
      {"{kind: hdf5, path: " + truncated + "}", truncated + ": cannot open as HDF5 (HDF5: "},
      {"{kind: hdf5, path: " + h5 + ", dataset: /imgs}", h5 + ": no dataset '/imgs' in the file; it holds /images"},
      {"{kind: lmdb, path: " + junk + "}", junk + ": not an LMDB environment"},
      {"{kind: npy, path: " + npy + "}", npy + ": "},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.workload);
    const std::string config = WriteText("c.yaml", "workload: " + c.workload + "\n");
    const auto r = RunFeedtune("trial " + config, dir_);
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find(c.error), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("samples/s"), std::string::npos) << r.out;
  }
}

// ---------------------------------------------------------------------------
// inspect

// A 1000-samples-per-chunk gzip file: each shuffled sample inflates its whole
// 2 MB chunk with HDF5's default 1 MiB cache. inspect predicts that within 10%
// of the chunk's size and says what to do, and so does the sweep's workload
// line; one sample per chunk has no warning.
TEST_F(FormatDatasetsTest, InspectFindsTheChunkTrap) {
  using testing_util::RunFeedtune;
  const int64_t chunk_bytes = 1000 * 2000;
  const std::string bad = WriteHdf5(3000, 2000, 1000, 4, "bad.h5");
  auto r = RunFeedtune("inspect --format json --measure-seconds 0.2 " + bad, dir_);
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json report = nlohmann::json::parse(r.out);
  EXPECT_EQ(report["format"], "hdf5");
  const auto inflated = report["facts"]["inflated_bytes_per_sample"].get<int64_t>();
  EXPECT_NEAR(static_cast<double>(inflated), static_cast<double>(chunk_bytes), 0.1 * chunk_bytes);
  ASSERT_EQ(report["warnings"].size(), 1u) << r.out;
  const std::string warning = report["warnings"][0];
  EXPECT_NE(warning.find("each shuffled sample inflates a 2.0 MB chunk (1000 samples per chunk, gzip(4))"),
            std::string::npos) << warning;
  EXPECT_NE(warning.find("rechunk to 1-16 samples per chunk, or raise chunk_cache_mb to 6"), std::string::npos)
      << warning;
  EXPECT_GT(report["measurement"]["samples"].get<int64_t>(), 0);
  EXPECT_EQ(report["facts"]["datasets"].size(), 2u);

  r = RunFeedtune("inspect --measure-seconds 0 " + bad, dir_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("warning: dataset '/images': each shuffled sample inflates a 2.0 MB chunk"), std::string::npos)
      << r.out;
  // With a cache that holds every chunk, no inflation is predicted and no warning given.
  Hdf5Dataset dataset(FilesOptions{bad}, FormatOptions{}, FormatNoCost(), CpuCalibration{});
  EXPECT_EQ(PredictHdf5ReadCost(dataset.images(), 6).bytes_per_sample, 0);
  EXPECT_TRUE(Hdf5Warnings(dataset.images(), 6).empty());
  EXPECT_EQ(PredictHdf5ReadCost(dataset.images(), 4).bytes_per_sample, (chunk_bytes + 1) / 3);  // 2 of 3 chunks cached

  tuner::SweepConfig config = tuner::ParseConfig("workload: {kind: hdf5, path: " + bad + "}\n", "h.yaml");
  EXPECT_NE(tuner::OpenWorkload(config).description.find("\nwarning: dataset '/images': each shuffled sample"),
            std::string::npos);

  const std::string good = WriteHdf5(3000, 2000, 1, 4, "good.h5");
  const InspectReport fine = Inspect(good, InspectOptions{});
  EXPECT_TRUE(fine.warnings.empty());
  EXPECT_GT(fine.measured_samples, 0);
  EXPECT_EQ(Hdf5Dataset::OpenObjectsInThisProcess(), 0);

  r = RunFeedtune("inspect " + WriteText("x.bin", "hello"), dir_);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("not a format inspect knows"), std::string::npos) << r.err;
}

TEST_F(FormatDatasetsTest, InspectNpyAndLmdb) {
  const InspectReport npy = Inspect(WriteNpy(30, 500), InspectOptions{});
  EXPECT_EQ(npy.format, "npy");
  const nlohmann::json& facts = npy.json_facts;
  EXPECT_EQ(facts["shape"], nlohmann::json({30, 500}));
  EXPECT_EQ(facts["sample_bytes"], 500);
  EXPECT_EQ(npy.measured_samples, 30);
  const InspectReport lmdb = Inspect(WriteLmdb(40, 300), InspectOptions{});
  EXPECT_EQ(lmdb.format, "lmdb");
  EXPECT_EQ(lmdb.json_facts["entries"], 40);
  EXPECT_NE(lmdb.ToText().find("file_system"), std::string::npos);
}

}  // namespace
}  // namespace feedtune::workloads

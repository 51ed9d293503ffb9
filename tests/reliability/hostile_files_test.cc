// Files that are not what feedtune expects, given where it expects its own:
// a results file that is not SQLite, an SQLite file that is not feedtune's, one
// from a newer feedtune, a damaged one; corrupt and truncated shard files. Each
// is refused with a clear message, by every command that takes it, and left
// byte for byte as it was (no -wal, -shm or -journal file appears beside it).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "tests/reliability/harness.h"
#include "workloads/crc32c.h"

namespace feedtune::reliability {
namespace {

void RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* message = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message), SQLITE_OK) << (message ? message : "");
  sqlite3_free(message);
  sqlite3_close(db);
}

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct HostileDb {
  const char* name;
  const char* expected;  // what the one error line says after "feedtune: <path>: "
};

class HostileResultsFile : public testing::Test {
 protected:
  // Every command that opens a results file refuses `db` with `expected` and
  // leaves it (and its folder) untouched.
  void ExpectRefusedByEveryCommand(const std::string& db, const std::string& expected) {
    const std::string before = FileDigest(db);
    const std::string config = dir_.Write("c.yaml", TinySweepConfig("hostile"));
    const std::vector<std::vector<std::string>> commands = {
        {"sweep", config, "--db", db}, {"report", "--db", db}, {"report", "--db", db, "--format", "json"}};
    for (const auto& args : commands) {
      const ChildResult r = RunFeedtune(args, Generous(Seconds(60)));
      const std::string what = args[0] + " on " + db;
      EXPECT_EQ(r.exit_code, 1) << what << "\n" << r.err;
      EXPECT_EQ(r.err, "feedtune: " + db + ": " + expected + "\n") << what;
      EXPECT_EQ(CountTrialLines(r.err), 0) << what;
      EXPECT_EQ(FileDigest(db), before) << what << " changed the file";
      if (wal_mode_) {
        // feedtune's own files are in WAL mode, and sqlite keeps the -wal and
        // -shm files of a read-only connection; nothing may have been written.
        EXPECT_TRUE(!fs::exists(db + "-wal") || fs::file_size(db + "-wal") == 0) << what << " wrote to the log";
      } else {
        for (const char* suffix : {"-wal", "-shm", "-journal"}) {
          EXPECT_FALSE(fs::exists(db + suffix)) << what << " left " << db << suffix;
        }
      }
      ++refusals_;
    }
  }

  void TearDown() override {
    std::printf("[ figures  ] %d refusals of a hostile results file\n", refusals_);
  }

  TempDir dir_{"hostiledb"};
  int refusals_ = 0;
  bool wal_mode_ = false;  // the file under test was written by feedtune
};

TEST_F(HostileResultsFile, NotSqlite) {
  const std::string db = dir_.Write("text.db", "these are my notes, not a database\n");
  ExpectRefusedByEveryCommand(db, "not a feedtune results file (not an SQLite database); choose another --db path");
}

TEST_F(HostileResultsFile, RandomBytes) {
  std::string noise(64 * 1024, '\0');
  for (size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<char>((i * 2654435761u) >> 13);
  const std::string db = dir_.Write("noise.db", noise);
  ExpectRefusedByEveryCommand(db, "not a feedtune results file (not an SQLite database); choose another --db path");
}

TEST_F(HostileResultsFile, SqliteHeaderThenGarbage) {
  std::string forged = "SQLite format 3";
  forged.push_back('\0');
  forged += std::string(4096, '\x5a');
  const std::string db = dir_.Write("forged.db", forged);
  ExpectRefusedByEveryCommand(db, "not a feedtune results file (not an SQLite database); choose another --db path");
}

TEST_F(HostileResultsFile, ForeignSqliteDatabase) {
  const std::string db = dir_ / "other.db";
  RawExec(db, "CREATE TABLE recipes (name TEXT, minutes INTEGER); INSERT INTO recipes VALUES ('soup', 40);");
  ExpectRefusedByEveryCommand(db, "not a feedtune results file (application_id 0x00000000); refusing to modify it");
  EXPECT_EQ(QueryColumn(db, "SELECT name FROM recipes")[0], "soup");
}

TEST_F(HostileResultsFile, SqliteWithAnotherApplicationId) {
  const std::string db = dir_ / "app.db";
  RawExec(db, "PRAGMA application_id = 1234; CREATE TABLE t (x);");
  ExpectRefusedByEveryCommand(db, "not a feedtune results file (application_id 0x000004d2); refusing to modify it");
}

TEST_F(HostileResultsFile, NewerSchemaVersion) {
  // A real results file, then marked as written by a future feedtune.
  const std::string db = dir_ / "future.db";
  const std::string config = dir_.Write("seed.yaml", TinySweepConfig("future"));
  ASSERT_EQ(RunFeedtune({"sweep", config, "--db", db}, Generous(Seconds(120))).exit_code, 0);
  const int64_t version = QueryInt(db, "PRAGMA user_version");
  RawExec(db, "PRAGMA user_version = " + std::to_string(version + 7));
  wal_mode_ = true;
  ExpectRefusedByEveryCommand(db, "results file has schema version " + std::to_string(version + 7) +
                                      ", this feedtune understands up to " + std::to_string(version) +
                                      "; upgrade feedtune");
}

TEST_F(HostileResultsFile, TruncatedResultsFileIsRefusedWithoutDamage) {
  const std::string db = dir_ / "cut.db";
  const std::string config = dir_.Write("seed.yaml", TinySweepConfig("cut"));
  ASSERT_EQ(RunFeedtune({"sweep", config, "--db", db}, Generous(Seconds(120))).exit_code, 0);
  const std::string whole = Bytes(db);
  ASSERT_GT(whole.size(), 8192u);
  const std::string cut = dir_.Write("cut2.db", whole.substr(0, whole.size() / 2 + 100));
  const std::string before = FileDigest(cut);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"sweep", config, "--db", cut}, std::vector<std::string>{"report", "--db", cut}}) {
    const ChildResult r = RunFeedtune(args, Generous(Seconds(60)));
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("feedtune: " + cut + ": ", 0), 0u) << r.err;
    EXPECT_EQ(CountTrialLines(r.err), 0) << r.err;
    EXPECT_EQ(FileDigest(cut), before) << args[0] << " changed the damaged file";
    ++refusals_;
  }
}

// --- Shard files ---------------------------------------------------------------

class HostileShards : public testing::Test {
 protected:
  void SetUp() override {
    data_ = dir_ / "data";
    const ChildResult r = RunFeedtune({"gen-data", "--out", data_, "--layout", "shards", "--samples", "64",
                                       "--sample-bytes", "512", "--shard-bytes", "8192", "--quiet"},
                                      Generous(Seconds(60)));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    config_ = dir_.Write("files.yaml", "name: shards\nworkload:\n  kind: files\n  path: " + data_ +
                                           "\n  cpu_us_per_sample: 0\nloader:\n  batch_size: 8\n"
                                           "device:\n  backend: host-sim\n  step_us: 500\n"
                                           "sweep:\n  repeats: 1\n  warmup_batches: 1\n  measure_seconds: 0.1\n");
  }

  // `feedtune trial` on the damaged dataset: exit code, and the error line.
  ChildResult Trial(const std::vector<std::string>& sets = {}) {
    std::vector<std::string> args = {"trial", config_};
    for (const auto& s : sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    return RunFeedtune(args, Generous(Seconds(60)));
  }

  void Overwrite(const std::string& path, size_t offset, const std::string& bytes) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  std::vector<std::string> Digests() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(data_)) out.push_back(e.path().filename().string() + "=" + FileDigest(e.path()));
    std::sort(out.begin(), out.end());
    return out;
  }

  TempDir dir_{"shards"};
  std::string data_;
  std::string config_;
};

TEST_F(HostileShards, IntactDatasetLoads) {
  const ChildResult r = Trial();
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(HostileShards, TruncatedIndexIsRefused) {
  const std::string index = data_ + "/index.ftidx";
  fs::resize_file(index, fs::file_size(index) - 10);
  const auto before = Digests();
  const ChildResult r = Trial();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(index + ": truncated or padded: "), std::string::npos) << r.err;
  EXPECT_EQ(Digests(), before);
}

TEST_F(HostileShards, IndexWithBadMagicIsRefused) {
  const std::string index = data_ + "/index.ftidx";
  Overwrite(index, 0, "NOTANIDX");
  const auto before = Digests();
  const ChildResult r = Trial();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(index + ": not a feedtune index (bad magic at byte offset 0)"), std::string::npos) << r.err;
  EXPECT_EQ(Digests(), before);
}

TEST_F(HostileShards, IndexWithFlippedBitFailsItsChecksum) {
  const std::string index = data_ + "/index.ftidx";
  Overwrite(index, 40, "\x7f");
  const ChildResult r = Trial();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(index + ": index checksum mismatch"), std::string::npos) << r.err;
}

TEST_F(HostileShards, TruncatedShardIsRefusedAtOpen) {
  const std::string shard = data_ + "/shard-00000.ftrec";
  fs::resize_file(shard, fs::file_size(shard) / 2);
  const auto before = Digests();
  const ChildResult r = Trial();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(shard + ": record "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" is truncated: it ends at byte "), std::string::npos) << r.err;
  EXPECT_EQ(Digests(), before);
}

TEST_F(HostileShards, ShardWithBadMagicIsRefused) {
  const std::string shard = data_ + "/shard-00000.ftrec";
  Overwrite(shard, 0, "GARBAGE!");
  const ChildResult r = Trial();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(shard + ": not a feedtune shard (bad magic at byte offset 0)"), std::string::npos) << r.err;
}

TEST_F(HostileShards, MissingShardIsRefused) {
  const std::string shard = data_ + "/shard-00001.ftrec";
  ASSERT_TRUE(fs::remove(shard));
  const ChildResult r = Trial();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(shard + ": cannot open shard listed in the index: No such file or directory"),
            std::string::npos)
      << r.err;
}

// A flipped byte inside a record's payload: found by the CRC32C on read, in a
// worker process or in the consumer, and named by file, record and offset.
TEST_F(HostileShards, CorruptPayloadIsFoundOnReadByEveryPath) {
  const std::string shard = data_ + "/shard-00000.ftrec";
  // Record 3 of shard 0: 16-byte shard header, then records of 8 + 512 bytes.
  const size_t record3 = 16 + 3 * (8 + 512);
  Overwrite(shard, record3 + 8 + 100, "\x01\x02\x03");
  const auto before = Digests();
  for (const std::vector<std::string>& sets :
       {std::vector<std::string>{}, std::vector<std::string>{"loader.num_workers=2"},
        std::vector<std::string>{"loader.num_workers=2", "workload.io=mmap"},
        std::vector<std::string>{"loader.num_workers=2", "loader.worker_mode=thread"}}) {
    const ChildResult r = Trial(sets);
    std::string what;
    for (const auto& s : sets) what += s + " ";
    EXPECT_EQ(r.exit_code, 1) << what << r.err;
    EXPECT_NE(r.err.find(shard + ": record 3 (record 3 of this shard) at byte offset " + std::to_string(record3) +
                         ": corrupt: CRC32C of the payload is "),
              std::string::npos)
        << what << r.err;
  }
  EXPECT_EQ(Digests(), before);
}

// A record whose header disagrees with the index about its length.
TEST_F(HostileShards, RecordHeaderLengthMismatchIsFound) {
  const std::string shard = data_ + "/shard-00000.ftrec";
  const size_t record2 = 16 + 2 * (8 + 512);
  Overwrite(shard, record2, std::string("\x01\x02\x00\x00", 4));
  const ChildResult r = Trial();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(shard + ": record 2 (record 2 of this shard) at byte offset " + std::to_string(record2) +
                       ": corrupt record header: length 513, the index says 512"),
            std::string::npos)
      << r.err;
}

// Found by tests/fuzz/shard_fuzzer: an index with a right checksum but a
// damaged shard count (2^28) must be refused at once, not after building a
// path per claimed shard.
TEST_F(HostileShards, IndexClaimingHugeShardCountIsRefusedAtOnce) {
  const std::string index = data_ + "/index.ftidx";
  std::string bytes = Bytes(index);
  const uint32_t shards = (1u << 28) + 1;
  std::memcpy(bytes.data() + 12, &shards, 4);
  const uint32_t crc = workloads::Crc32c(std::as_bytes(std::span(bytes.data(), bytes.size() - 4)));
  std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);
  std::ofstream(index, std::ios::binary | std::ios::trunc) << bytes;
  const ChildResult r = Trial();
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(index + ": the header claims 268435457 shards for "), std::string::npos) << r.err;
  EXPECT_LT(r.wall_s, 5.0);
  EXPECT_LT(r.max_rss_kib, 256 * 1024);
}

}  // namespace
}  // namespace feedtune::reliability

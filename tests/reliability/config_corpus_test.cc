// The malformed-config corpus (tests/testdata/bad-configs, listed with the
// expected message of each in MANIFEST.tsv): every file makes `feedtune
// validate` and `feedtune sweep` exit 2 with exactly that one-line message,
// without a crash, within a few seconds, within memory in proportion to the
// file, and (sweep) without creating a results file.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/reliability/harness.h"

namespace feedtune::reliability {
namespace {

struct Case {
  std::string file;
  bool exact = true;
  std::string text;  // with {path}
};

// "\xNN" is a byte, "\\" a backslash.
std::string Unescape(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == '\\') {
      out += '\\';
      ++i;
    } else if (text[i] == '\\' && i + 3 < text.size() && text[i + 1] == 'x') {
      out += static_cast<char>(std::stoi(text.substr(i + 2, 2), nullptr, 16));
      i += 3;
    } else {
      out += text[i];
    }
  }
  return out;
}

fs::path CorpusDir() { return SourceDir() / "tests/testdata/bad-configs"; }

std::vector<Case> LoadManifest() {
  std::vector<Case> cases;
  std::ifstream in(CorpusDir() / "MANIFEST.tsv");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t a = line.find('\t');
    const size_t b = line.find('\t', a + 1);
    if (a == std::string::npos || b == std::string::npos) {
      ADD_FAILURE() << "bad manifest line: " << line;
      continue;
    }
    cases.push_back({line.substr(0, a), line.substr(a + 1, b - a - 1) == "exact", Unescape(line.substr(b + 1))});
  }
  return cases;
}

std::string Expand(const std::string& text, const std::string& path) {
  const std::string placeholder = "{path}";
  std::string out;
  size_t from = 0;
  for (size_t at; (at = text.find(placeholder, from)) != std::string::npos; from = at + placeholder.size()) {
    out.append(text, from, at - from);
    out += path;
  }
  out.append(text, from, std::string::npos);
  return out;
}

// Peak RSS allowed for rejecting a config of `bytes`: a fixed base (more under
// sanitizers, whose runtime alone takes tens of MiB) plus 64 times the input.
int64_t RssBudgetKib(uintmax_t bytes) {
  const int64_t base_kib = UnderSanitizer() ? 512 * 1024 : 64 * 1024;
  return base_kib + static_cast<int64_t>(bytes) * 64 / 1024;
}

uintmax_t SizeOf(const fs::path& p) {
  std::error_code error;
  const uintmax_t size = fs::is_regular_file(p, error) ? fs::file_size(p, error) : 0;
  return error ? 0 : size;
}

// One config through one command: exit 2, the expected line, bounded time and memory.
void Check(const std::vector<std::string>& args, const std::string& path, const Case& c, const std::string& what) {
  const ChildResult r = RunFeedtune(args, Generous(Seconds(20)));
  ASSERT_FALSE(r.timed_out) << what << ": took over " << Generous(Seconds(20)).count() << " s";
  EXPECT_EQ(r.signal, 0) << what << ": killed by signal " << r.signal << "\n" << r.err;
  EXPECT_EQ(r.exit_code, 2) << what << "\n" << r.err;
  const std::string expected = "feedtune: " + Expand(c.text, path);
  if (c.exact) {
    EXPECT_EQ(r.err, expected + "\n") << what;
  } else {
    EXPECT_EQ(r.err.rfind(expected, 0), 0u) << what << "\n" << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << what << ": not one line\n" << r.err;
  }
  EXPECT_TRUE(r.out.empty()) << what << ": printed on stdout\n" << r.out;
  EXPECT_LE(r.max_rss_kib, RssBudgetKib(SizeOf(path))) << what << ": peak RSS out of proportion";
}

TEST(BadConfigs, CorpusHasAtLeastFortyCasesAndEveryFileIsListed) {
  const std::vector<Case> cases = LoadManifest();
  EXPECT_GE(cases.size(), 40u);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(CorpusDir())) {
    if (e.path().filename() == "MANIFEST.tsv") continue;
    ++files;
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(std::any_of(cases.begin(), cases.end(), [&](const Case& c) { return c.file == name; }))
        << name << " is not in MANIFEST.tsv";
  }
  EXPECT_EQ(files, cases.size());
}

TEST(BadConfigs, EveryCaseExitsTwoWithItsMessage) {
  const TempDir dir("badconfigs");
  int tried = 0;
  for (const Case& c : LoadManifest()) {
    const std::string path = (CorpusDir() / c.file).string();
    SCOPED_TRACE(c.file);
    Check({"validate", path}, path, c, "validate " + c.file);
    const std::string db = dir / (c.file + ".db");
    Check({"sweep", path, "--db", db}, path, c, "sweep " + c.file);
    // (No file should appear at all: see SweepWithABadConfigCreatesNoResultsFile.)
    if (fs::exists(db)) {
      EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM runs"), 0) << "sweep " << c.file << " started a run";
    }
    ++tried;
  }
  std::printf("[ figures  ] %d malformed configs tried, each by validate and sweep\n", tried);
}

// A sweep with a bad config must not leave a results file behind: the config
// is loaded before the results file is opened (it once was the other way round).
TEST(BadConfigs, SweepWithABadConfigCreatesNoResultsFile) {
  const TempDir dir("badconfignodb");
  const std::string db = dir / "results/r.db";
  const std::string path = (CorpusDir() / "structure-unknown-key-typo.yaml").string();
  const ChildResult r = RunFeedtune({"sweep", path, "--db", db}, Generous(Seconds(20)));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_FALSE(fs::exists(db));
  EXPECT_FALSE(fs::exists(dir / "results"));
}

// Found by tests/fuzz/config_fuzzer: a string that is not valid UTF-8 was
// accepted, and the effective config printed back (with U+FFFD) was not the
// one that ran. It is refused now; if it is ever accepted again, it must
// read back the same.
TEST(BadConfigs, ConfigThatIsNotUtf8RoundTrips) {
  const TempDir dir("utf8");
  const std::string first = dir.Write("a.yaml", "name: t\nworkload:\n  kind: command\n  argv: [python3, \"{a\x8d\x92"
                                      "b}\"]\n");
  const ChildResult a = RunFeedtune({"validate", first}, Generous(Seconds(20)));
  if (a.exit_code == 2) return;  // refused: fixed that way
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const std::string second = dir.Write("b.yaml", a.out);
  const ChildResult b = RunFeedtune({"validate", second}, Generous(Seconds(20)));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  // "# <file>: valid; effective config (workload hash H)": the same H.
  const auto hash = [](const std::string& out) { return out.substr(out.find("workload hash"), 30); };
  EXPECT_EQ(hash(a.out), hash(b.out));
}

// Found by tests/fuzz/config_fuzzer: yaml-cpp 0.7's LoadAll never ends on a
// top-level ',' (it appends empty documents until memory runs out). The child
// runs under a 1 GiB address-space limit so that a regression cannot take the
// machine's memory.
TEST(BadConfigs, ATopLevelCommaIsAnErrorNotAnEndlessLoop) {
  if (UnderSanitizer()) GTEST_SKIP() << "needs RLIMIT_AS, which sanitizers cannot run under";
  const TempDir dir("comma");
  ChildOptions options;
  options.rlimits = {{RLIMIT_AS, rlim_t{1} << 30}};
  for (const char* text : {",\n", "\"x\", y\n", "a: 1\n--- ,\n"}) {
    const std::string path = dir.Write("comma.yaml", text);
    const ChildResult r = RunFeedtune({"validate", path}, Generous(Seconds(20)), options);
    EXPECT_EQ(r.exit_code, 2) << text << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("feedtune: " + path + ":", 0), 0u) << r.err;
  }
}

// Paths that are not config files at all.
TEST(BadConfigs, PathsThatAreNotConfigFiles) {
  const TempDir dir("badpaths");
  const std::string missing = dir / "missing.yaml";
  std::vector<Case> cases = {
      {missing, true, "{path}: cannot read config: No such file or directory"},
      {"/dev/null", true, "{path}:1:1: expected a mapping with keys name, workload, loader, device, sweep, got an empty document"},
      {"/dev/zero", true, "{path}: cannot read config: larger than 1 MiB"},
      {"/proc/self/mem", false, "{path}: cannot read config: "},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    Check({"validate", c.file}, c.file, c, "validate " + c.file);
  }
}

// yaml-cpp's memory grows far out of proportion on huge input (16 MiB of "["
// took 3.9 GB and 21 s; a million keys 960 MB). Configs are a few hundred
// bytes: the reader refuses more than 1 MiB, and the nesting depth is checked
// before yaml-cpp sees the text.
TEST(BadConfigs, HugeConfigsAreRejectedWithinMemoryInProportion) {
  const TempDir dir("hugeconfigs");
  const std::string open_brackets = dir.Write("brackets.yaml", "name: " + std::string((16 << 20) - 100, '['));
  std::string keys;
  for (int i = 0; i < 1000000; ++i) {
    // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "k" + std::to_string(i).
    const std::string number = std::to_string(i);
    keys += 'k';
    keys += number;
    keys += ": ";
    keys += number;
    keys += '\n';
  }
  const std::string many_keys = dir.Write("keys.yaml", keys);
  std::string list = "sweep:\n  prefetch_factors: [1";
  for (int i = 0; i < 5000000; ++i) list += ", 1";
  const std::string long_list = dir.Write("list.yaml", list + "]\n");
  for (const std::string& path : {open_brackets, many_keys, long_list}) {
    SCOPED_TRACE(path);
    const ChildResult r = RunFeedtune({"validate", path}, Generous(Seconds(20)));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_LE(r.max_rss_kib, RssBudgetKib(SizeOf(path))) << r.err;
  }
}

// yaml-cpp reports its depth limit as "bad file"; feedtune says what is wrong.
TEST(BadConfigs, DeepNestingIsReportedAsSuch) {
  for (const char* name : {"nesting-deep-flow-lists.yaml", "nesting-deep-flow-maps.yaml", "nesting-deep-block-maps.yaml"}) {
    const std::string path = (CorpusDir() / name).string();
    const ChildResult r = RunFeedtune({"validate", path}, Generous(Seconds(20)));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err.find("bad file"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("deep"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace feedtune::reliability

#include "results/fingerprint.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/common/fake_root.h"

namespace feedtune::results {
namespace {

namespace fs = std::filesystem;

std::string FixtureRoot(const std::string& name) {
#ifdef FEEDTUNE_SOURCE_DIR
  const fs::path source_dir = FEEDTUNE_SOURCE_DIR;
#else
  // Built by hand from the repository root: __FILE__ is tests/results/<this file>.
  const fs::path source_dir = fs::path(__FILE__).parent_path().parent_path().parent_path();
#endif
  return (source_dir / "tests/testdata/proc" / name).string();
}

// A scratch root for the cases the two captured trees do not cover.
using testing_util::FakeRoot;

constexpr const char* kFourCpus =
    "processor\t: 0\nmodel name\t: Fake CPU\n\nprocessor\t: 1\nmodel name\t: Fake CPU\n\n"
    "processor\t: 2\nmodel name\t: Fake CPU\n\nprocessor\t: 3\nmodel name\t: Fake CPU\n";

TEST(FingerprintTest, CgroupV2BoxWithFractionalCpuQuota) {
  const Fingerprint f = ReadFingerprint(FixtureRoot("cgroup_v2_box"));
  EXPECT_EQ(f.hostname, "gpu-box-a");
  EXPECT_EQ(f.label, "");
  EXPECT_EQ(f.cpu_model, "AMD EPYC 7713 64-Core Processor");
  EXPECT_EQ(f.logical_cpus, 4);
  EXPECT_DOUBLE_EQ(f.cgroup_cpu_limit, 1.5);
  EXPECT_EQ(f.usable_cpus, 2);  // ceil(1.5) of the 4 in the cpuset
  EXPECT_EQ(f.numa_nodes, 1);
  EXPECT_EQ(f.mem_total_bytes, int64_t{16384000} * 1024);
  EXPECT_EQ(f.cgroup_mem_limit_bytes, 0);  // memory.max "max"
  EXPECT_EQ(f.shm_bytes, 0);               // the fixture has no dev/shm
  EXPECT_EQ(f.nofile_limit, 1048576);
  EXPECT_EQ(f.kernel, "6.1.0-18-amd64");
  EXPECT_EQ(f.gpu_name, "");
  EXPECT_EQ(f.gpu_count, 0);
}

TEST(FingerprintTest, CgroupV1BoxWithoutQuotaAndWithMemoryLimit) {
  const Fingerprint f = ReadFingerprint(FixtureRoot("cgroup_v1_box"));
  EXPECT_EQ(f.hostname, "trainer-07");
  EXPECT_EQ(f.cpu_model, "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz");
  EXPECT_EQ(f.logical_cpus, 8);
  EXPECT_DOUBLE_EQ(f.cgroup_cpu_limit, 0);  // cfs_quota_us -1
  EXPECT_EQ(f.usable_cpus, 8);
  EXPECT_EQ(f.numa_nodes, 2);
  EXPECT_EQ(f.mem_total_bytes, int64_t{65844348} * 1024);
  // proc/self/cgroup names the host's /docker/... path; the limit is read at the mount.
  EXPECT_EQ(f.cgroup_mem_limit_bytes, int64_t{4} << 30);
  EXPECT_EQ(f.shm_bytes, 0);
  EXPECT_EQ(f.nofile_limit, 1024);  // the soft limit, not the hard one
  EXPECT_EQ(f.kernel, "5.4.0-150-generic");
}

TEST(FingerprintTest, CgroupV2LimitsOfAncestorsApply) {
  FakeRoot fake;
  fake.Write("proc/cpuinfo", kFourCpus);
  fake.Write("proc/self/cgroup", "0::/job.slice/trial\n");
  fake.Write("sys/fs/cgroup/cpu.max", "max 100000\n");
  fake.Write("sys/fs/cgroup/job.slice/cpu.max", "300000 100000\n");
  fake.Write("sys/fs/cgroup/job.slice/trial/cpu.max", "max 100000\n");
  fake.Write("sys/fs/cgroup/memory.max", "max\n");
  fake.Write("sys/fs/cgroup/job.slice/memory.max", "8589934592\n");
  fake.Write("sys/fs/cgroup/job.slice/trial/memory.max", "17179869184\n");
  fake.Write("sys/fs/cgroup/job.slice/trial/cpuset.cpus.effective", "0-1,3\n");
  const Fingerprint f = ReadFingerprint(fake.root());
  EXPECT_EQ(f.logical_cpus, 4);
  EXPECT_DOUBLE_EQ(f.cgroup_cpu_limit, 3.0);
  EXPECT_EQ(f.usable_cpus, 3);  // cpuset 0-1,3 and quota 3
  EXPECT_EQ(f.cgroup_mem_limit_bytes, int64_t{8} << 30);
  EXPECT_EQ(f.cpu_model, "Fake CPU");
}

TEST(FingerprintTest, CgroupV1UnlimitedMemoryAndQuota) {
  FakeRoot fake;
  fake.Write("proc/cpuinfo", kFourCpus);
  fake.Write("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "50000\n");
  fake.Write("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
  fake.Write("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  const Fingerprint f = ReadFingerprint(fake.root());
  EXPECT_DOUBLE_EQ(f.cgroup_cpu_limit, 0.5);
  EXPECT_EQ(f.usable_cpus, 1);
  EXPECT_EQ(f.cgroup_mem_limit_bytes, 0);
  EXPECT_EQ(f.numa_nodes, 1);  // no node folder at all
  EXPECT_EQ(f.nofile_limit, 0);
}

TEST(FingerprintTest, CpuModelFallsBackToHardwareLine) {
  FakeRoot fake;
  fake.Write("proc/cpuinfo",
             "processor\t: 0\nBogoMIPS\t: 48.00\n\nprocessor\t: 1\nBogoMIPS\t: 48.00\n\n"
             "Hardware\t: BCM2835\nRevision\t: c03111\n");
  const Fingerprint f = ReadFingerprint(fake.root());
  EXPECT_EQ(f.cpu_model, "BCM2835");
  EXPECT_EQ(f.logical_cpus, 2);
  EXPECT_EQ(f.usable_cpus, 2);
}

TEST(FingerprintTest, LiveSystem) {
  const Fingerprint f = ReadFingerprint();
  EXPECT_FALSE(f.hostname.empty());
  EXPECT_FALSE(f.cpu_model.empty());
  EXPECT_GE(f.logical_cpus, 1);
  EXPECT_GE(f.usable_cpus, 1);
  EXPECT_GE(f.numa_nodes, 1);
  EXPECT_GT(f.mem_total_bytes, 0);
  EXPECT_GT(f.nofile_limit, 0);
  EXPECT_FALSE(f.kernel.empty());
  EXPECT_GE(f.shm_bytes, 0);
  EXPECT_EQ(ReadFingerprint().Hash(), f.Hash());
}

TEST(FingerprintTest, HashIsStableAndIgnoresNamesAndSoftSettings) {
  const Fingerprint f = ReadFingerprint(FixtureRoot("cgroup_v2_box"));
  const std::string hash = f.Hash();
  ASSERT_EQ(hash.size(), 16u);
  for (char c : hash) EXPECT_TRUE(std::isdigit(c) || (c >= 'a' && c <= 'f')) << hash;
  EXPECT_EQ(ReadFingerprint(FixtureRoot("cgroup_v2_box")).Hash(), hash);

  Fingerprint renamed = f;
  renamed.hostname = "another-name";
  renamed.label = "lab";
  renamed.kernel = "6.8.0";
  renamed.shm_bytes = 123;
  renamed.nofile_limit = 4096;
  renamed.gpu_driver = "999.1";
  renamed.pcie_link = "Gen3 x8";
  EXPECT_EQ(renamed.Hash(), hash);

  Fingerprint quota = f;
  quota.cgroup_cpu_limit = 2.0;
  EXPECT_NE(quota.Hash(), hash);
  Fingerprint gpu = f;
  gpu.gpu_name = "NVIDIA H200";
  gpu.gpu_count = 1;
  EXPECT_NE(gpu.Hash(), hash);
  EXPECT_NE(ReadFingerprint(FixtureRoot("cgroup_v1_box")).Hash(), hash);
}

TEST(FingerprintTest, HashOfKnownInputIsFixed) {
  // Pins the canonical form: changing it would split every stored machine in two.
  Fingerprint f;
  f.cpu_model = "Test CPU";
  f.logical_cpus = 4;
  f.usable_cpus = 2;
  f.cgroup_cpu_limit = 1.5;
  f.numa_nodes = 1;
  f.mem_total_bytes = 1 << 30;
  // FNV-1a 64 of "cpu_model=Test CPU\nlogical_cpus=4\n...gpu_mem_bytes=0\n", checked with Python.
  EXPECT_EQ(f.Hash(), "a4024ce1448cee6a");
}

}  // namespace
}  // namespace feedtune::results

namespace feedtune::results {
namespace {

TEST(SetGpusTest, FillsSummaryFromTheDeviceLayersListAndChangesTheHash) {
  Fingerprint f;
  f.cpu_model = "Fake CPU";
  f.logical_cpus = 4;
  f.usable_cpus = 4;
  const std::string cpu_only = f.Hash();
  const GpuInfo h200{.name = "NVIDIA H200",
                     .mem_bytes = int64_t{141} << 30,
                     .driver = "560.35.03",
                     .runtime = "12.6",
                     .pci_bus_id = "0000:3b:00.0",
                     .link = "gen5 x16"};
  GpuInfo second = h200;
  second.pci_bus_id = "0000:5e:00.0";
  SetGpus(&f, {h200, second});
  EXPECT_EQ(f.gpu_count, 2);
  EXPECT_EQ(f.gpu_name, "NVIDIA H200");
  EXPECT_EQ(f.gpu_mem_bytes, int64_t{141} << 30);
  EXPECT_EQ(f.gpu_driver, "560.35.03");
  EXPECT_EQ(f.gpu_runtime, "12.6");
  EXPECT_EQ(f.pcie_link, "gen5 x16");
  ASSERT_EQ(f.gpus.size(), 2u);
  EXPECT_EQ(f.gpus[1].pci_bus_id, "0000:5e:00.0");
  EXPECT_NE(f.Hash(), cpu_only) << "a GPU makes another machine";

  // A PCIe link or a driver update is the same machine; another GPU model is not.
  const std::string two_h200 = f.Hash();
  second.link = "gen4 x16";
  second.driver = "570.1";
  SetGpus(&f, {h200, second});
  EXPECT_EQ(f.Hash(), two_h200);
  second.name = "NVIDIA A100";
  SetGpus(&f, {h200, second});
  EXPECT_EQ(f.gpu_name, "NVIDIA H200 (+ other models)");
  EXPECT_NE(f.Hash(), two_h200);

  SetGpus(&f, {});
  EXPECT_EQ(f.gpu_count, 0);
  EXPECT_TRUE(f.gpu_name.empty());
  EXPECT_TRUE(f.gpus.empty());
  EXPECT_EQ(f.Hash(), cpu_only);
}

}  // namespace
}  // namespace feedtune::results

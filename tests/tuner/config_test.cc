// Tests for the strict sweep-config parser (tuner/config/config.h, docs/config.md).
// Error tests compare the whole message: its exact wording is the user interface.
#include "tuner/config/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#ifndef FEEDTUNE_SOURCE_DIR
#define FEEDTUNE_SOURCE_DIR "."
#endif

using feedtune::device::BackendChoice;
using feedtune::workloads::CacheMode;
using feedtune::workloads::FaultKind;
using feedtune::workloads::FilesIo;
using feedtune::workloads::FilesLayout;
using feedtune::workloads::SizeDist;
using feedtune::workloads::WorkloadKind;
using feedtune::loader::WorkerMode;
using feedtune::tuner::ApplyOverride;
using feedtune::tuner::ConfigError;
using feedtune::tuner::LoadConfig;
using feedtune::tuner::ParseConfig;
using feedtune::tuner::SweepConfig;
using feedtune::tuner::ToYaml;
using feedtune::tuner::WorkloadHash;

// The message ParseConfig(text, "x.yaml") throws, or "no error".
static std::string ErrorOf(const std::string& text) {
  try {
    ParseConfig(text, "x.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

static std::string OverrideErrorOf(SweepConfig& config, const std::string& assignment) {
  try {
    ApplyOverride(config, assignment);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

// Field by field, doubles exactly: round trips must be lossless. `source` is
// where a config came from, not part of it.
static void ExpectSameConfig(const SweepConfig& a, const SweepConfig& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.workload.kind, b.workload.kind);
  const auto& sa = a.workload.synthetic;
  const auto& sb = b.workload.synthetic;
  EXPECT_EQ(sa.samples, sb.samples);
  EXPECT_EQ(sa.sample_bytes, sb.sample_bytes);
  EXPECT_EQ(sa.cpu_us_per_sample, sb.cpu_us_per_sample);
  EXPECT_EQ(sa.io_us_per_sample, sb.io_us_per_sample);
  EXPECT_EQ(sa.jitter, sb.jitter);
  EXPECT_EQ(sa.worker_init_us, sb.worker_init_us);
  EXPECT_EQ(sa.leak_bytes_per_sample, sb.leak_bytes_per_sample);
  EXPECT_EQ(sa.seed, sb.seed);
  EXPECT_EQ(sa.size.dist, sb.size.dist);
  EXPECT_EQ(sa.size.mean, sb.size.mean);
  EXPECT_EQ(sa.size.sigma, sb.size.sigma);
  EXPECT_EQ(sa.size.min, sb.size.min);
  EXPECT_EQ(sa.size.max, sb.size.max);
  EXPECT_EQ(sa.fault, sb.fault);
  EXPECT_EQ(a.workload.files.path, b.workload.files.path);
  EXPECT_EQ(a.workload.files.path_list, b.workload.files.path_list);
  EXPECT_EQ(a.workload.files.decode, b.workload.files.decode);
  EXPECT_EQ(a.workload.files.crop, b.workload.files.crop);
  EXPECT_EQ(a.workload.files.resize, b.workload.files.resize);
  EXPECT_EQ(a.workload.files.layout, b.workload.files.layout);
  EXPECT_EQ(a.workload.files.io, b.workload.files.io);
  EXPECT_EQ(a.workload.files.cache, b.workload.files.cache);
  EXPECT_EQ(a.workload.command.argv, b.workload.command.argv);
  EXPECT_EQ(a.workload.command.timeout_s, b.workload.command.timeout_s);
  EXPECT_EQ(a.loader.knobs, b.loader.knobs);
  EXPECT_EQ(a.loader.shuffle, b.loader.shuffle);
  EXPECT_EQ(a.loader.drop_last, b.loader.drop_last);
  EXPECT_EQ(a.loader.worker_mode, b.loader.worker_mode);
  EXPECT_EQ(a.loader.timeout_s, b.loader.timeout_s);
  EXPECT_EQ(a.loader.seed, b.loader.seed);
  EXPECT_EQ(a.device.backend, b.device.backend);
  EXPECT_EQ(a.device.step_us, b.device.step_us);
  EXPECT_EQ(a.device.sync_every_steps, b.device.sync_every_steps);
  EXPECT_EQ(a.device.prefetch_to_device, b.device.prefetch_to_device);
  EXPECT_EQ(a.device.host_sim.h2d_gbps_pinned, b.device.host_sim.h2d_gbps_pinned);
  EXPECT_EQ(a.device.host_sim.h2d_gbps_pageable, b.device.host_sim.h2d_gbps_pageable);
  EXPECT_EQ(a.sweep.max_workers, b.sweep.max_workers);
  EXPECT_EQ(a.sweep.prefetch_factors, b.sweep.prefetch_factors);
  EXPECT_EQ(a.sweep.repeats, b.sweep.repeats);
  EXPECT_EQ(a.sweep.warmup_batches, b.sweep.warmup_batches);
  EXPECT_EQ(a.sweep.measure_seconds, b.sweep.measure_seconds);
  EXPECT_EQ(a.sweep.gain_threshold, b.sweep.gain_threshold);
  EXPECT_EQ(a.sweep.knee_tolerance, b.sweep.knee_tolerance);
  EXPECT_EQ(a.sweep.budget.memory_fraction, b.sweep.budget.memory_fraction);
  EXPECT_EQ(a.sweep.budget.shm_fraction, b.sweep.budget.shm_fraction);
  EXPECT_EQ(a.sweep.budget.job_epochs, b.sweep.budget.job_epochs);
  EXPECT_EQ(a.sweep.background.warn_cpu, b.sweep.background.warn_cpu);
  EXPECT_EQ(a.sweep.background.disturbed_cpu, b.sweep.background.disturbed_cpu);
  EXPECT_EQ(a.sweep.background.sample_seconds, b.sweep.background.sample_seconds);
}

// A config with every field away from its default, doubles that print badly
// with a fixed precision, and a name that must be quoted in YAML.
static SweepConfig Unusual() {
  SweepConfig c;
  c.name = "null";
  c.workload.synthetic = {.samples = 1000000000,
                          .sample_bytes = 3,
                          .size = {},
                          .cpu_us_per_sample = 10000000,
                          .io_us_per_sample = 7,
                          .jitter = 0.1 + 0.2,
                          .worker_init_us = 1,
                          .leak_bytes_per_sample = int64_t{1} << 30,
                          .fault = {.kind = FaultKind::kSegv, .at_sample = 999999999},
                          .seed = std::numeric_limits<uint64_t>::max()};
  c.loader.knobs = {.batch_size = 65536,
                    .num_workers = 1024,
                    .pin_memory = true,
                    .non_blocking = true,
                    .prefetch_factor = 64,
                    .persistent_workers = true};
  c.loader.shuffle = false;
  c.loader.drop_last = false;
  c.loader.worker_mode = WorkerMode::kThread;
  c.loader.timeout_s = 1e-7;
  c.loader.seed = 42;
  c.device.backend = BackendChoice::kHostSim;
  c.device.step_us = 0;
  c.device.sync_every_steps = 0;
  c.device.prefetch_to_device = true;
  c.device.host_sim = {.h2d_gbps_pinned = 1.0 / 3, .h2d_gbps_pageable = 1e300};
  c.sweep.max_workers = 17;
  c.sweep.prefetch_factors = {64, 1, 3};
  c.sweep.repeats = 100;
  c.sweep.warmup_batches = 0;
  c.sweep.measure_seconds = 3600;
  c.sweep.gain_threshold = 0;
  c.sweep.knee_tolerance = 0.9999999999999999;
  c.sweep.budget = {.memory_fraction = 1, .shm_fraction = 5e-324, .job_epochs = 1'000'000};
  c.sweep.background = {.warn_cpu = 0.1 + 0.2, .disturbed_cpu = 1e-300, .sample_seconds = 0};
  return c;
}

// ---------------------------------------------------------------------------
// Errors: unknown keys.

TEST(ConfigErrorTest, UnknownKeySuggestsCloseMatch) {
  EXPECT_EQ(ErrorOf("name: a\nloader:\n  num_worker: 4\n"),
            "x.yaml:3:3: loader.num_worker: unknown key; did you mean 'num_workers'?");
}

TEST(ConfigErrorTest, UnknownKeySuggestsCaseInsensitiveMatch) {
  EXPECT_EQ(ErrorOf("Loader:\n  batch_size: 4\n"),
            "x.yaml:1:1: Loader: unknown key; did you mean 'loader'?");
}

TEST(ConfigErrorTest, UnknownKeyWithoutCloseMatchListsAllowedKeys) {
  EXPECT_EQ(
      ErrorOf("loader:\n  frobnicate: 4\n"),
      "x.yaml:2:3: loader.frobnicate: unknown key; allowed keys: batch_size, shuffle, drop_last, "
      "worker_mode, num_workers, pin_memory, non_blocking, prefetch_factor, persistent_workers, "
      "worker_threads, fetch_concurrency, multiprocessing_context, timeout_s, seed");
}

TEST(ConfigErrorTest, KeyInWrongSectionNamesItsPlace) {
  EXPECT_EQ(ErrorOf("loader:\n  step_us: 4\n"),
            "x.yaml:2:3: loader.step_us: unknown key; did you mean 'device.step_us'?");
  EXPECT_EQ(ErrorOf("batch_size: 4\n"),
            "x.yaml:1:1: batch_size: unknown key; did you mean 'loader.batch_size'?");
}

TEST(ConfigErrorTest, DottedKeyInFileIsRejected) {
  EXPECT_EQ(
      ErrorOf("loader.batch_size: 4\n"),
      "x.yaml:1:1: loader.batch_size: unknown key; dotted paths are for --set, write it nested "
      "under 'loader'");
}

TEST(ConfigErrorTest, DuplicateKey) {
  EXPECT_EQ(ErrorOf("loader:\n  batch_size: 4\n  batch_size: 8\n"),
            "x.yaml:3:3: loader.batch_size: duplicate key; first given at line 2, column 3");
}

// ---------------------------------------------------------------------------
// Errors: types.

TEST(ConfigErrorTest, StringForInteger) {
  EXPECT_EQ(ErrorOf("sweep:\n  repeats: three\n"),
            "x.yaml:2:12: sweep.repeats: expected an integer in [1, 100], got \"three\"");
}

TEST(ConfigErrorTest, QuotedNumberIsAString) {
  EXPECT_EQ(ErrorOf("sweep:\n  repeats: \"3\"\n"),
            "x.yaml:2:12: sweep.repeats: expected an integer in [1, 100], got \"3\" (quoted, so a "
            "string)");
}

TEST(ConfigErrorTest, FloatForInteger) {
  EXPECT_EQ(ErrorOf("loader:\n  batch_size: 1.5\n"),
            "x.yaml:2:15: loader.batch_size: expected an integer in [1, 65536], got 1.5");
}

TEST(ConfigErrorTest, BooleanMustBeTrueOrFalse) {
  EXPECT_EQ(ErrorOf("loader:\n  shuffle: yes\n"),
            "x.yaml:2:12: loader.shuffle: expected true or false, got \"yes\"");
  EXPECT_EQ(ErrorOf("loader:\n  pin_memory: 1\n"),
            "x.yaml:2:15: loader.pin_memory: expected true or false, got 1");
}

TEST(ConfigErrorTest, MappingWhereScalarExpected) {
  EXPECT_EQ(ErrorOf("loader:\n  batch_size: {a: 1}\n"),
            "x.yaml:2:15: loader.batch_size: expected an integer in [1, 65536], got a mapping");
}

TEST(ConfigErrorTest, EmptyValueIsNull) {
  EXPECT_EQ(ErrorOf("loader:\n  batch_size:\n  shuffle: true\n"),
            "x.yaml:2:3: loader.batch_size: expected an integer in [1, 65536], got null");
}

TEST(ConfigErrorTest, SectionGivenAsScalar) {
  EXPECT_EQ(ErrorOf("loader: 3\n"), "x.yaml:1:9: loader: expected a mapping, got 3");
}

TEST(ConfigErrorTest, EnumTypoSuggests) {
  EXPECT_EQ(
      ErrorOf("loader:\n  worker_mode: proces\n"),
      "x.yaml:2:16: loader.worker_mode: expected one of process|thread, got \"proces\"; did you "
      "mean 'process'?");
  EXPECT_EQ(ErrorOf("device:\n  backend: gpu\n"),
            "x.yaml:2:12: device.backend: expected one of auto|cuda|host-sim, got \"gpu\"");
}

TEST(ConfigErrorTest, WorkloadKind) {
  EXPECT_EQ(ErrorOf("workload:\n  kind: bogus\n"),
            "x.yaml:2:9: workload.kind: expected one of synthetic|files|command|npy|hdf5|lmdb|tfrecord|tar, got \"bogus\"");
  EXPECT_EQ(ErrorOf("workload:\n  kind: file\n"),
            "x.yaml:2:9: workload.kind: expected one of synthetic|files|command|npy|hdf5|lmdb|tfrecord|tar, got \"file\"; did "
            "you mean 'files'?");
}

TEST(ConfigErrorTest, FilesNeedAPathAndCommandsAnArgv) {
  EXPECT_EQ(ErrorOf("workload:\n  kind: files\n"),
            "x.yaml:2:9: workload.kind: expected workload.path, the dataset's directory, when "
            "workload.kind is files (make one with `feedtune gen-data`), got none");
  EXPECT_EQ(ErrorOf("workload:\n  kind: command\n"),
            "x.yaml:2:9: workload.kind: expected workload.argv, the command to run, when "
            "workload.kind is command, got none");
  EXPECT_EQ(ErrorOf("workload:\n  kind: files\n  path: \"\"\n"),
            "x.yaml:3:9: workload.path: expected a non-empty string, got \"\"");
}

TEST(ConfigErrorTest, KeyOfAnotherWorkloadKind) {
  EXPECT_EQ(ErrorOf("workload:\n  kind: synthetic\n  path: data\n"),
            "x.yaml:3:9: workload.path: unknown key for workload.kind synthetic (it is for files, npy, hdf5, "
            "lmdb, tfrecord and tar)");
  EXPECT_EQ(ErrorOf("workload:\n  samples: 10\n  kind: files\n  path: d\n"),
            "x.yaml:2:12: workload.samples: unknown key for workload.kind files (it is for "
            "synthetic)");
  EXPECT_EQ(ErrorOf("workload:\n  kind: command\n  argv: [a]\n  cpu_us_per_sample: 5\n"),
            "x.yaml:4:22: workload.cpu_us_per_sample: unknown key for workload.kind command (it is "
            "for synthetic, files, npy, hdf5, lmdb, tfrecord and tar)");
  EXPECT_EQ(ErrorOf("workload:\n  kind: files\n  path: d\n  layout: file\n"),
            "x.yaml:4:11: workload.layout: expected one of shards|files, got \"file\"; did you mean "
            "'files'?");
}

TEST(ConfigErrorTest, CommandArgv) {
  EXPECT_EQ(ErrorOf("workload:\n  kind: command\n  argv: python3\n"),
            "x.yaml:3:9: workload.argv: expected a non-empty list of strings (the command and its "
            "arguments), got \"python3\"");
  EXPECT_EQ(ErrorOf("workload:\n  kind: command\n  argv: [python3, {a: 1}]\n"),
            "x.yaml:3:19: workload.argv[1]: expected a string, got a mapping");
  EXPECT_EQ(ErrorOf("workload:\n  kind: command\n  argv: [\"\", x]\n"),
            "x.yaml:3:10: workload.argv[0]: expected the command (a non-empty string), got \"\"");
  EXPECT_EQ(ErrorOf("workload:\n  kind: command\n  argv: [p, \"--n={num_worker}\"]\n"),
            "x.yaml:3:13: workload.argv[1]: unknown placeholder {num_worker}; did you mean "
            "{num_workers}?");
  EXPECT_EQ(ErrorOf("workload:\n  kind: command\n  argv: [p, \"{zzz}\"]\n"),
            "x.yaml:3:13: workload.argv[1]: unknown placeholder {zzz}; known: {num_workers}, "
            "{pin_memory}, {non_blocking}, {prefetch_factor}, {persistent_workers}, {batch_size}, "
            "{multiprocessing_context}, {fetch_concurrency}, {measure_seconds}, {warmup_batches}, {step_us}, "
            "{sync_every_steps}, {rank}, {world_size}");
  // JSON in an argument is not a placeholder.
  EXPECT_EQ(ErrorOf("workload:\n  kind: command\n  argv: [p, '{\"a\": 1}', '{}', '{A}']\n"),
            "no error");
  EXPECT_EQ(ErrorOf("workload:\n  kind: command\n  argv: [p]\n  timeout_s: 0\n"),
            "x.yaml:4:14: workload.timeout_s: expected a number > 0, got 0");
  // A command on an object store takes each trial's requests in flight: in
  // its argv under the run protocol, on stdin under serve.
  EXPECT_EQ(ErrorOf("workload:\n  kind: command\n  argv: [p, \"--n={num_workers}\"]\n  remote_reads: true\n"),
            "x.yaml:4:17: workload.remote_reads: expected {fetch_concurrency} in workload.argv when "
            "workload.remote_reads is true and workload.protocol is run (each trial's requests in flight reach the "
            "command there), got none; add it where the command takes it, or use workload.protocol: serve");
  EXPECT_EQ(ErrorOf("workload:\n  kind: command\n  argv: [p, \"--fc={fetch_concurrency}\"]\n"
                    "  remote_reads: true\n"),
            "no error");
  EXPECT_EQ(ErrorOf("workload:\n  kind: command\n  argv: [p]\n  protocol: serve\n  remote_reads: true\n"),
            "no error");
}

TEST(ConfigErrorTest, SampleBytesDistribution) {
  const std::string prefix = "workload:\n  sample_bytes: ";
  EXPECT_EQ(ErrorOf(prefix + "big\n"),
            "x.yaml:2:17: workload.sample_bytes: expected an integer in [1, 1073741824] or a "
            "distribution {dist: lognormal|uniform, mean, sigma, min, max}, got \"big\"");
  EXPECT_EQ(ErrorOf(prefix + "{mean: 5}\n"),
            "x.yaml:2:17: workload.sample_bytes.dist: expected lognormal or uniform, got nothing");
  EXPECT_EQ(ErrorOf(prefix + "{dist: lognorm, mean: 5}\n"),
            "x.yaml:2:24: workload.sample_bytes.dist: expected lognormal or uniform, got "
            "\"lognorm\"; did you mean 'lognormal'?");
  EXPECT_EQ(ErrorOf(prefix + "{dist: lognormal, mean: 5}\n"),
            "x.yaml:2:17: workload.sample_bytes.sigma: expected a value (required with dist "
            "lognormal), got nothing");
  EXPECT_EQ(ErrorOf(prefix + "{dist: lognormal, mean: 5, sigma: 0}\n"),
            "x.yaml:2:51: workload.sample_bytes.sigma: expected a number in (0, 4], got 0");
  EXPECT_EQ(ErrorOf(prefix + "{dist: lognormal, mean: 500, sigma: 1, max: 100}\n"),
            "x.yaml:2:61: workload.sample_bytes.max: expected at least mean (500), got 100");
  EXPECT_EQ(ErrorOf(prefix + "{dist: lognormal, mean: 500, sigmaa: 1}\n"),
            "x.yaml:2:46: workload.sample_bytes.sigmaa: unknown key; did you mean 'sigma'?");
  EXPECT_EQ(ErrorOf(prefix + "{dist: uniform, min: 5, max: 9, sigma: 1}\n"),
            "x.yaml:2:56: workload.sample_bytes.sigma: unknown key for dist uniform; allowed keys: "
            "dist, min, max");
  EXPECT_EQ(ErrorOf(prefix + "{dist: uniform, min: 9, max: 5}\n"),
            "x.yaml:2:46: workload.sample_bytes.max: expected at least min (9), got 5");
  EXPECT_EQ(ErrorOf(prefix + "{dist: uniform, min: 1, min: 2, max: 5}\n"),
            "x.yaml:2:41: workload.sample_bytes.min: duplicate key; first given at line 2, column "
            "33");
  // The largest size counts against the batch-memory limit.
  EXPECT_EQ(ErrorOf(prefix + "{dist: uniform, min: 1, max: 1073741824}\n"),
            "x.yaml:2:17: workload.sample_bytes: expected loader.batch_size * "
            "workload.sample_bytes <= 2147483648 (2 GiB) so a batch fits in memory, got 64 * "
            "1073741824 = 68719476736");
}

TEST(ConfigErrorTest, Fault) {
  EXPECT_EQ(ErrorOf("workload:\n  fault: exit\n"),
            "x.yaml:2:10: workload.fault: expected null or {kind: throw|exit|abort|segv|hang, "
            "at_sample: N}, got \"exit\"");
  EXPECT_EQ(ErrorOf("workload:\n  fault: {at_sample: 3}\n"),
            "x.yaml:2:10: workload.fault.kind: expected one of throw|exit|abort|segv|hang, got "
            "nothing");
  EXPECT_EQ(ErrorOf("workload:\n  fault: {kind: segfault}\n"),
            "x.yaml:2:17: workload.fault.kind: expected one of throw|exit|abort|segv|hang, got "
            "\"segfault\"");
  EXPECT_EQ(ErrorOf("workload:\n  fault: {kind: exit, at_sample: -1}\n"),
            "x.yaml:2:34: workload.fault.at_sample: expected an integer in [0, 1000000000], got -1");
  EXPECT_EQ(ErrorOf("workload:\n  fault: {kind: exit, at: 1}\n"),
            "x.yaml:2:23: workload.fault.at: unknown key; allowed keys: kind, at_sample");
  EXPECT_EQ(ErrorOf("workload:\n  samples: 100\n  fault: {kind: exit, at_sample: 100}\n"),
            "x.yaml:3:10: workload.fault: expected fault.at_sample < workload.samples (else it "
            "never fires), got 100 >= 100");
}

TEST(ConfigErrorTest, NameMustBeALabel) {
  EXPECT_EQ(ErrorOf("name: \"my run\"\n"),
            "x.yaml:1:7: name: expected a label of 1 to 128 characters from [A-Za-z0-9_.-], got "
            "\"my run\"");
}

// ---------------------------------------------------------------------------
// Errors: ranges.

TEST(ConfigErrorTest, BatchSizeZero) {
  EXPECT_EQ(ErrorOf("loader:\n  batch_size: 0\n"),
            "x.yaml:2:15: loader.batch_size: expected an integer in [1, 65536], got 0");
}

TEST(ConfigErrorTest, RepeatsZero) {
  EXPECT_EQ(ErrorOf("sweep:\n  repeats: 0\n"),
            "x.yaml:2:12: sweep.repeats: expected an integer in [1, 100], got 0");
}

TEST(ConfigErrorTest, JitterAboveOne) {
  EXPECT_EQ(ErrorOf("workload:\n  jitter: 1.5\n"),
            "x.yaml:2:11: workload.jitter: expected a number in [0, 1], got 1.5");
}

TEST(ConfigErrorTest, NotANumberOrInfinite) {
  EXPECT_EQ(ErrorOf("workload:\n  jitter: .nan\n"),
            "x.yaml:2:11: workload.jitter: expected a finite number in [0, 1], got .nan");
  EXPECT_EQ(ErrorOf("loader:\n  timeout_s: .inf\n"),
            "x.yaml:2:14: loader.timeout_s: expected a finite number >= 0, got .inf");
}

TEST(ConfigErrorTest, Negative) {
  EXPECT_EQ(ErrorOf("loader:\n  timeout_s: -1\n"),
            "x.yaml:2:14: loader.timeout_s: expected a number >= 0, got -1");
  EXPECT_EQ(
      ErrorOf("workload:\n  cpu_us_per_sample: -5\n"),
      "x.yaml:2:22: workload.cpu_us_per_sample: expected an integer in [0, 10000000], got -5");
  EXPECT_EQ(ErrorOf("loader:\n  seed: -1\n"),
            "x.yaml:2:9: loader.seed: expected an integer in [0, 18446744073709551615], got -1");
}

TEST(ConfigErrorTest, OpenIntervalBounds) {
  EXPECT_EQ(ErrorOf("sweep:\n  budget: {memory_fraction: 0}\n"),
            "x.yaml:2:29: sweep.budget.memory_fraction: expected a number in (0, 1], got 0");
  EXPECT_EQ(ErrorOf("sweep:\n  gain_threshold: 1\n"),
            "x.yaml:2:19: sweep.gain_threshold: expected a number in [0, 1), got 1");
  EXPECT_EQ(ErrorOf("device:\n  host_sim: {h2d_gbps_pinned: 0}\n"),
            "x.yaml:2:31: device.host_sim.h2d_gbps_pinned: expected a number > 0, got 0");
}

TEST(ConfigErrorTest, IntegerOverflowIsOutOfRange) {
  EXPECT_EQ(ErrorOf("workload:\n  samples: 99999999999999999999999\n"),
            "x.yaml:2:12: workload.samples: expected an integer in [1, 1000000000], got "
            "99999999999999999999999");
}

TEST(ConfigErrorTest, MaxWorkers) {
  EXPECT_EQ(ErrorOf("sweep:\n  max_workers: 0\n"),
            "x.yaml:2:16: sweep.max_workers: expected auto or an integer in [1, 1024], got 0");
  EXPECT_EQ(ErrorOf("sweep:\n  max_workers: automatic\n"),
            "x.yaml:2:16: sweep.max_workers: expected auto or an integer in [1, 1024], got "
            "\"automatic\"");
}

TEST(ConfigErrorTest, PrefetchFactorsList) {
  EXPECT_EQ(
      ErrorOf("sweep:\n  prefetch_factors: []\n"),
      "x.yaml:2:21: sweep.prefetch_factors: expected a non-empty list of integers in [1, 64], got "
      "an empty list");
  EXPECT_EQ(ErrorOf("sweep:\n  prefetch_factors: 2\n"),
            "x.yaml:2:21: sweep.prefetch_factors: expected a non-empty list of integers in [1, "
            "64], got 2");
  EXPECT_EQ(ErrorOf("sweep:\n  prefetch_factors: [1, 2, 65]\n"),
            "x.yaml:2:28: sweep.prefetch_factors[2]: expected an integer in [1, 64], got 65");
  EXPECT_EQ(
      ErrorOf("sweep:\n  prefetch_factors: [1, 2, 2]\n"),
      "x.yaml:2:28: sweep.prefetch_factors[2]: expected an integer in [1, 64] not already in the "
      "list, got 2");
}

// ---------------------------------------------------------------------------
// Errors: checks across keys.

TEST(ConfigErrorTest, BatchTooLargeForMemory) {
  EXPECT_EQ(ErrorOf("workload:\n  sample_bytes: 1048576\nloader:\n  batch_size: 4096\n"),
            "x.yaml:4:15: loader.batch_size: expected loader.batch_size * workload.sample_bytes <= "
            "2147483648 (2 GiB) so a batch fits in memory, got 4096 * 1048576 = 4294967296");
  // Only sample_bytes given: the error points at it.
  EXPECT_EQ(
      ErrorOf("workload:\n  sample_bytes: 1073741824\n"),
      "x.yaml:2:17: workload.sample_bytes: expected loader.batch_size * workload.sample_bytes <= "
      "2147483648 (2 GiB) so a batch fits in memory, got 64 * 1073741824 = 68719476736");
  // Exactly 2 GiB is allowed.
  EXPECT_EQ(ErrorOf("workload:\n  sample_bytes: 1048576\nloader:\n  batch_size: 2048\n"),
            "no error");
}

TEST(ConfigErrorTest, FewerSamplesThanBatchWithDropLast) {
  EXPECT_EQ(ErrorOf("workload:\n  samples: 10\n"),
            "x.yaml:2:12: workload.samples: expected workload.samples >= loader.batch_size when "
            "loader.drop_last is true (else an epoch has no batch), got 10 < 64");
  EXPECT_EQ(ErrorOf("workload:\n  samples: 10\nloader:\n  drop_last: false\n"), "no error");
}

// ---------------------------------------------------------------------------
// Errors: document shape and files.

TEST(ConfigErrorTest, SyntaxError) {
  EXPECT_EQ(ErrorOf("name: a\nloader: [1,\n"),
            "x.yaml:3:1: invalid YAML: end of sequence flow not found");
  EXPECT_EQ(ErrorOf("loader:\n  batch_size: 1: 2\n"),
            "x.yaml:2:16: invalid YAML: illegal map value");
}

TEST(ConfigErrorTest, EmptyDocument) {
  const std::string expected =
      "x.yaml:1:1: expected a mapping with keys name, workload, loader, device, sweep, got an "
      "empty document";
  EXPECT_EQ(ErrorOf(""), expected);
  EXPECT_EQ(ErrorOf("# nothing but a comment\n"), expected);
}

TEST(ConfigErrorTest, TopLevelMustBeAMapping) {
  EXPECT_EQ(
      ErrorOf("- name: a\n- loader: {}\n"),
      "x.yaml:1:1: expected a mapping with keys name, workload, loader, device, sweep, got a list");
  EXPECT_EQ(ErrorOf("quickstart\n"),
            "x.yaml:1:1: expected a mapping with keys name, workload, loader, device, sweep, got "
            "\"quickstart\"");
}

TEST(ConfigErrorTest, SecondDocument) {
  EXPECT_EQ(ErrorOf("name: a\n---\nname: b\n"),
            "x.yaml:3:1: expected a single YAML document, got a second one");
  EXPECT_EQ(ErrorOf("name: a\n---\n"), "no error");  // a trailing separator is harmless
}

class ConfigFileTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("feedtune_config_test_" + std::to_string(::getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    const std::filesystem::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  static std::string LoadErrorOf(const std::string& path) {
    try {
      LoadConfig(path);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "no error";
  }

  std::filesystem::path dir_;
};

TEST_F(ConfigFileTest, MissingFile) {
  const std::string path = (dir_ / "absent.yaml").string();
  EXPECT_EQ(LoadErrorOf(path), path + ": cannot read config: No such file or directory");
}

TEST_F(ConfigFileTest, Directory) {
  EXPECT_EQ(LoadErrorOf(dir_.string()), dir_.string() + ": cannot read config: Is a directory");
}

TEST_F(ConfigFileTest, EmptyFile) {
  const std::string path = Write("empty.yaml", "");
  EXPECT_EQ(LoadErrorOf(path), path +
                                   ":1:1: expected a mapping with keys name, workload, loader, "
                                   "device, sweep, got an empty document");
}

TEST_F(ConfigFileTest, ErrorNamesThePath) {
  const std::string path = Write("bad.yaml", "name: a\nsweep:\n  repeats: three\n");
  EXPECT_EQ(LoadErrorOf(path),
            path + ":3:12: sweep.repeats: expected an integer in [1, 100], got \"three\"");
}

TEST_F(ConfigFileTest, LoadsAndRecordsSource) {
  const std::string path = Write("ok.yaml", "name: a\nloader:\n  num_workers: 3\n");
  const SweepConfig config = LoadConfig(path);
  EXPECT_EQ(config.source, path);
  EXPECT_EQ(config.name, "a");
  EXPECT_EQ(config.loader.knobs.num_workers, 3);
}

TEST_F(ConfigFileTest, FilesWorkloadDirectoryMustHoldADataset) {
  const std::string data = (dir_ / "data").string();
  const auto config_for = [&](const std::string& layout) {
    return Write("f.yaml", "workload:\n  kind: files\n  path: " + data + "\n  layout: " + layout + "\n");
  };
  std::string path = config_for("shards");
  EXPECT_EQ(LoadErrorOf(path),
            path + ":3:9: workload.path: expected a directory holding a dataset, got \"" + data +
                "\" (No such file or directory; make one with `feedtune gen-data --out " + data +
                " --layout shards ...`)");
  std::filesystem::create_directories(data);
  EXPECT_EQ(LoadErrorOf(path),
            path + ":3:9: workload.path: expected a directory holding a dataset, got \"" + data +
                "\" (the directory is empty; make one with `feedtune gen-data --out " + data +
                " --layout shards ...`)");
  std::ofstream(data + "/a.jpg") << "x";
  EXPECT_EQ(LoadErrorOf(path),
            path + ":3:9: workload.path: expected a directory holding a dataset, got \"" + data +
                "\" (no index.ftidx, so not a sharded dataset; for a directory of your own files use "
                "layout: files)");
  path = config_for("files");
  EXPECT_EQ(LoadErrorOf(path), "no error");
  // ParseConfig does not look at the file system.
  EXPECT_NO_THROW(ParseConfig("workload: {kind: files, path: /nonexistent/x}\n", "x.yaml"));
}

// ---------------------------------------------------------------------------
// Accepted configs.

TEST(ConfigTest, MissingSectionsKeepDefaults) {
  const SweepConfig config = ParseConfig("name: only-a-name\n", "x.yaml");
  SweepConfig expected;
  expected.name = "only-a-name";
  ExpectSameConfig(config, expected);
  EXPECT_EQ(config.source, "x.yaml");
}

TEST(ConfigTest, EmptySectionsKeepDefaults) {
  const SweepConfig config = ParseConfig("loader:\nsweep: {}\n", "x.yaml");
  ExpectSameConfig(config, SweepConfig());
}

TEST(ConfigTest, QuickstartFixtureMatchesDefaults) {
  const SweepConfig config =
      LoadConfig(FEEDTUNE_SOURCE_DIR "/tests/testdata/configs/quickstart.yaml");
  SweepConfig expected;
  expected.name = "quickstart";
  ExpectSameConfig(config, expected);
}

// The example configs of the other workload kinds (tests/testdata/configs/).
TEST(ConfigTest, DesignExamplesOfFilesAndCommand) {
  const auto read = [](const std::string& name) {
    const std::string path = FEEDTUNE_SOURCE_DIR "/tests/testdata/configs/" + name;
    std::ifstream in(path);
    // ParseConfig: data/shards need not exist for the example to be well-formed.
    return ParseConfig(std::string(std::istreambuf_iterator<char>(in), {}), path);
  };
  const SweepConfig files = read("files.yaml");
  EXPECT_EQ(files.workload.kind, WorkloadKind::kFiles);
  EXPECT_EQ(files.workload.files.path, "data/shards");
  EXPECT_EQ(files.workload.files.layout, FilesLayout::kShards);
  EXPECT_EQ(files.workload.files.io, FilesIo::kPread);
  EXPECT_EQ(files.workload.files.cache, CacheMode::kWarm);
  EXPECT_EQ(files.workload.synthetic.cpu_us_per_sample, 100);
  const SweepConfig command = read("command.yaml");
  EXPECT_EQ(command.workload.kind, WorkloadKind::kCommand);
  EXPECT_EQ(command.workload.command.argv,
            (std::vector<std::string>{"python3", "workloads/python/feedtune_probe.py", "--dataset",
                                      "mypkg.data:make_dataset", "--num-workers", "{num_workers}",
                                      "--pin-memory", "{pin_memory}"}));
  EXPECT_EQ(command.workload.command.timeout_s, 300.0);
}

TEST(ConfigTest, ReadsEveryKind) {
  const SweepConfig config = ParseConfig(
      "name: v1.2_x-y\n"
      "workload: {samples: 100, jitter: 0, seed: 18446744073709551615}\n"
      "loader: {worker_mode: thread, pin_memory: True, timeout_s: 2.5e1, batch_size: +8}\n"
      "device: {backend: host-sim, host_sim: {h2d_gbps_pageable: .5}}\n"
      "sweep: {max_workers: 16, prefetch_factors: [2], measure_seconds: 3600}\n",
      "x.yaml");
  EXPECT_EQ(config.name, "v1.2_x-y");
  EXPECT_EQ(config.workload.synthetic.samples, 100);
  EXPECT_EQ(config.workload.synthetic.jitter, 0.0);
  EXPECT_EQ(config.workload.synthetic.seed, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(config.loader.worker_mode, WorkerMode::kThread);
  EXPECT_TRUE(config.loader.knobs.pin_memory);
  EXPECT_EQ(config.loader.timeout_s, 25.0);
  EXPECT_EQ(config.loader.knobs.batch_size, 8);
  EXPECT_EQ(config.device.backend, BackendChoice::kHostSim);
  EXPECT_EQ(config.device.host_sim.h2d_gbps_pageable, 0.5);
  EXPECT_EQ(config.device.host_sim.h2d_gbps_pinned, 25.0);
  EXPECT_EQ(config.sweep.max_workers, 16);
  EXPECT_EQ(config.sweep.prefetch_factors, std::vector<int>{2});
  EXPECT_EQ(config.sweep.measure_seconds, 3600.0);
}

TEST(ConfigTest, PrefetchFactorCarriedWithoutWorkers) {
  const SweepConfig config =
      ParseConfig("loader: {num_workers: 0, prefetch_factor: 8}\n", "x.yaml");
  EXPECT_EQ(config.loader.knobs.prefetch_factor, 8);
}

// ---------------------------------------------------------------------------
// ToYaml.

TEST(ConfigTest, ToYamlOfDefaults) {
  EXPECT_EQ(ToYaml(SweepConfig()),
            "name: unnamed\n"
            "workload:\n"
            "  kind: synthetic\n"
            "  samples: 4096\n"
            "  sample_bytes: 150528\n"
            "  cpu_us_per_sample: 200\n"
            "  cpu_threads: 1\n"
            "  io_us_per_sample: 0\n"
            "  jitter: 0.1\n"
            "  worker_init_us: 0\n"
            "  torch_costs: auto\n"
            "  leak_bytes_per_sample: 0\n"
            "  fault: null\n"
            "  seed: 0\n"
            "loader:\n"
            "  batch_size: 64\n"
            "  shuffle: true\n"
            "  drop_last: true\n"
            "  worker_mode: process\n"
            "  num_workers: 0\n"
            "  pin_memory: false\n"
            "  non_blocking: false\n"
            "  prefetch_factor: 2\n"
            "  persistent_workers: false\n"
            "  worker_threads: 0\n"
            "  fetch_concurrency: 1\n"
            "  timeout_s: 0.0\n"
            "  seed: 0\n"
            "device:\n"
            "  backend: auto\n"
            "  step_us: 20000\n"
            "  sync_every_steps: 1\n"
            "  prefetch_to_device: false\n"
            "  rank_barrier: true\n"
            "  host_sim: {h2d_gbps_pinned: 25.0, h2d_gbps_pageable: 8.0}\n"
            "sweep:\n"
            "  max_workers: auto\n"
            "  prefetch_factors: [1, 2, 4, 8]\n"
            "  repeats: 3\n"
            "  warmup_batches: 8\n"
            "  measure_seconds: 2.0\n"
            "  gain_threshold: 0.05\n"
            "  knee_tolerance: 0.05\n"
            "  time_budget_s: 0.0\n"
            "  copy_phases: true\n"
            "  ranks: auto\n"
            "  cpu_binding: auto\n"
            "  diagnose: true\n"
            "  budget: {memory_fraction: 0.5, shm_fraction: 0.8, job_epochs: 1}\n"
            "  background: {warn_cpu: 0.25, disturbed_cpu: 0.25, sample_seconds: 1.0}\n");
}

TEST(ConfigTest, ToYamlRoundTrips) {
  ExpectSameConfig(ParseConfig(ToYaml(SweepConfig()), "rt.yaml"), SweepConfig());
  const SweepConfig unusual = Unusual();
  const std::string yaml = ToYaml(unusual);
  EXPECT_NE(yaml.find("name: \"null\"\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("max_workers: 17\n"), std::string::npos) << yaml;
  const SweepConfig parsed = ParseConfig(yaml, "rt.yaml");
  ExpectSameConfig(parsed, unusual);
  EXPECT_EQ(ToYaml(parsed), yaml);
}

// decode: jpeg for a directory of JPEGs: the keys, their defaults, the YAML
// round trip (written only with decode: jpeg), the hash (unchanged for files
// configs without them), and the errors.
TEST(ConfigTest, FilesDecodeJpegKeys) {
  const SweepConfig jpeg = ParseConfig(
      "workload:\n  kind: files\n  path: imgs\n  layout: files\n  decode: jpeg\n  crop: center\n  resize: 160\n",
      "x.yaml");
  EXPECT_EQ(jpeg.workload.files.decode, feedtune::workloads::FilesDecode::kJpeg);
  EXPECT_EQ(jpeg.workload.files.crop, feedtune::workloads::CropMode::kCenter);
  EXPECT_EQ(jpeg.workload.files.resize, 160);
  const std::string yaml = ToYaml(jpeg);
  EXPECT_NE(yaml.find("  cache: warm\n  decode: jpeg\n  crop: center\n  resize: 160\n"), std::string::npos) << yaml;
  ExpectSameConfig(ParseConfig(yaml, "rt.yaml"), jpeg);
  const SweepConfig defaults =
      ParseConfig("workload: {kind: files, path: imgs, layout: files, decode: jpeg}\n", "x.yaml");
  EXPECT_EQ(defaults.workload.files.crop, feedtune::workloads::CropMode::kRandom);
  EXPECT_EQ(defaults.workload.files.resize, 224);
  const SweepConfig plain = ParseConfig("workload: {kind: files, path: imgs, layout: files}\n", "x.yaml");
  EXPECT_EQ(plain.workload.files.decode, feedtune::workloads::FilesDecode::kNone);
  EXPECT_EQ(ToYaml(plain).find("decode"), std::string::npos);
  EXPECT_NE(WorkloadHash(plain), WorkloadHash(defaults));
  EXPECT_NE(WorkloadHash(jpeg), WorkloadHash(defaults));
  // A files config that does not name decode hashes as before the key existed.
  EXPECT_EQ(WorkloadHash(plain),
            WorkloadHash(ParseConfig("workload: {kind: files, path: imgs, layout: files, decode: none}\n", "x.yaml")));

  EXPECT_EQ(ErrorOf("workload:\n  kind: files\n  path: d\n  layout: files\n  decode: png\n"),
            "x.yaml:5:11: workload.decode: expected one of none|jpeg, got \"png\"");
  EXPECT_EQ(ErrorOf("workload:\n  kind: files\n  path: d\n  layout: files\n  decode: jpeg\n  crop: centre\n"),
            "x.yaml:6:9: workload.crop: expected one of random|center, got \"centre\"; did you mean 'center'?");
  EXPECT_EQ(ErrorOf("workload:\n  kind: files\n  path: d\n  layout: files\n  decode: jpeg\n  resize: 0\n"),
            "x.yaml:6:11: workload.resize: expected an integer in [1, 4096], got 0");
  EXPECT_EQ(ErrorOf("workload:\n  kind: files\n  path: d\n  decode: jpeg\n"),
            "x.yaml:4:11: workload.decode: expected layout: files when workload.decode is jpeg (one JPEG file per "
            "sample), got shards");
  EXPECT_EQ(ErrorOf("workload:\n  kind: files\n  path: d\n  layout: files\n  resize: 128\n"),
            "x.yaml:5:11: workload.resize: applies only with workload.decode: jpeg (the sample is the file's bytes "
            "otherwise); add decode: jpeg, or remove it");
  EXPECT_EQ(ErrorOf("workload:\n  kind: npy\n  path: a.npy\n  crop: random\n"),
            "x.yaml:4:9: workload.crop: unknown key for workload.kind npy (it is for files, lmdb, tfrecord and tar)");
}

// decode: jpeg for the sharded formats: a record (or its feature), a tar
// sample's JPEG member; crop and resize with it, errors without it.
TEST(ConfigTest, ShardedDecodeJpegKeys) {
  for (const std::string kind : {"tfrecord", "tar"}) {
    const SweepConfig jpeg = ParseConfig("workload:\n  kind: " + kind +
                                             "\n  path: shards\n  decode: jpeg\n  crop: center\n  resize: 96\n",
                                         "x.yaml");
    EXPECT_EQ(jpeg.workload.files.decode, feedtune::workloads::FilesDecode::kJpeg) << kind;
    EXPECT_EQ(jpeg.workload.files.crop, feedtune::workloads::CropMode::kCenter) << kind;
    EXPECT_EQ(jpeg.workload.files.resize, 96) << kind;
    const std::string yaml = ToYaml(jpeg);
    EXPECT_NE(yaml.find("  decode: jpeg\n  crop: center\n  resize: 96\n"), std::string::npos) << yaml;
    ExpectSameConfig(ParseConfig(yaml, "rt.yaml"), jpeg);
    const SweepConfig plain = ParseConfig("workload: {kind: " + kind + ", path: shards}\n", "x.yaml");
    EXPECT_EQ(ToYaml(plain).find("decode"), std::string::npos) << kind;
    EXPECT_NE(WorkloadHash(plain), WorkloadHash(jpeg)) << kind;
    // A config that does not name decode hashes as before the key applied to the kind.
    EXPECT_EQ(WorkloadHash(plain),
              WorkloadHash(ParseConfig("workload: {kind: " + kind + ", path: shards, decode: none}\n", "x.yaml")));
  }
  EXPECT_EQ(ParseConfig("workload: {kind: tfrecord, path: s, feature: image, decode: jpeg}\n", "x.yaml")
                .workload.format.feature,
            "image");
  EXPECT_EQ(ErrorOf("workload:\n  kind: tfrecord\n  path: d\n  resize: 128\n"),
            "x.yaml:4:11: workload.resize: applies only with workload.decode: jpeg (the sample is the record's bytes "
            "otherwise); add decode: jpeg, or remove it");
  EXPECT_EQ(ErrorOf("workload:\n  kind: tar\n  path: d\n  crop: random\n"),
            "x.yaml:4:9: workload.crop: applies only with workload.decode: jpeg (the sample is its members' bytes "
            "otherwise); add decode: jpeg, or remove it");
  EXPECT_EQ(ErrorOf("workload:\n  kind: hdf5\n  path: a.h5\n  decode: jpeg\n"),
            "x.yaml:4:11: workload.decode: unknown key for workload.kind hdf5 (it is for files, lmdb, tfrecord and tar)");
}

// workload.path as a list of shards (tfrecord and tar): parsed in order,
// written back as a list, and an error for the other kinds.
TEST(ConfigTest, PathListOfShards) {
  const SweepConfig tar = ParseConfig(
      "workload:\n  kind: tar\n  path:\n    - /data/b.tar\n    - \"/data/a-*.tar\"\n    - /data/more\n", "x.yaml");
  EXPECT_EQ(tar.workload.files.path, "");
  EXPECT_EQ(tar.workload.files.path_list,
            (std::vector<std::string>{"/data/b.tar", "/data/a-*.tar", "/data/more"}));
  const std::string yaml = ToYaml(tar);
  EXPECT_NE(yaml.find("  path: [/data/b.tar, /data/a-*.tar, /data/more]\n"), std::string::npos) << yaml;
  ExpectSameConfig(ParseConfig(yaml, "rt.yaml"), tar);
  EXPECT_EQ(WorkloadHash(tar), WorkloadHash(ParseConfig("workload: {kind: tar, path: /elsewhere}\n", "x.yaml")));
  const SweepConfig tfrecord = ParseConfig("workload: {kind: tfrecord, path: [x.tfrecord]}\n", "x.yaml");
  EXPECT_EQ(tfrecord.workload.files.path_list, std::vector<std::string>{"x.tfrecord"});

  // A string after a list (--set) replaces it, and a list a string.
  SweepConfig changed = tar;
  ApplyOverride(changed, "workload.path=/data/all");
  EXPECT_EQ(changed.workload.files.path, "/data/all");
  EXPECT_TRUE(changed.workload.files.path_list.empty());
  ApplyOverride(changed, "workload.path=[p.tar, q.tar]");
  EXPECT_EQ(changed.workload.files.path, "");
  EXPECT_EQ(changed.workload.files.path_list, (std::vector<std::string>{"p.tar", "q.tar"}));

  EXPECT_EQ(ErrorOf("workload:\n  kind: hdf5\n  path: [a.h5, b.h5]\n"),
            "x.yaml:3:9: workload.path: expected one string when workload.kind is hdf5, got a list (a list of "
            "shards is for workload.kind tfrecord and tar); give the HDF5 file as one string");
  EXPECT_EQ(ErrorOf("workload:\n  path:\n    - a\n  kind: files\n"),
            "x.yaml:3:5: workload.path: expected one string when workload.kind is files, got a list (a list of "
            "shards is for workload.kind tfrecord and tar); give the dataset's directory as one string");
  EXPECT_EQ(ErrorOf("workload:\n  kind: tar\n  path:\n    - a.tar\n    - {x: 1}\n"),
            "x.yaml:5:7: workload.path[1]: expected a non-empty string (a shard file, directory or glob), got a "
            "mapping");
  EXPECT_EQ(ErrorOf("workload:\n  kind: tar\n  path: []\n"),
            "x.yaml:3:9: workload.path: expected a non-empty string; for tfrecord and tar also a non-empty list of "
            "them (shard files, directories or globs, read in list order), got an empty list");
  SweepConfig h5 = ParseConfig("workload: {kind: hdf5, path: a.h5}\n", "x.yaml");
  EXPECT_EQ(OverrideErrorOf(h5, "workload.path=[a.h5]"),
            "--set workload.path=[a.h5]: workload.path: expected one string when workload.kind is hdf5, got a list "
            "(a list of shards is for workload.kind tfrecord and tar); give the HDF5 file as one string");
}

// Each entry of the list must name shards on this machine: the one that
// names none is the error, at its own line.
TEST_F(ConfigFileTest, PathListEntryThatNamesNothingIsNamed) {
  std::ofstream(dir_ / "a.tar") << "";
  std::filesystem::create_directories(dir_ / "empty");
  const std::string a = (dir_ / "a.tar").string();
  const std::string glob = (dir_ / "b-*.tar").string();
  const std::string path = Write("l.yaml", "workload:\n  kind: tar\n  path:\n    - " + a + "\n    - \"" + glob +
                                               "\"\n");
  EXPECT_EQ(LoadErrorOf(path), path + ":5:7: workload.path[1]: expected a tar shard, directory or glob, got \"" +
                                   glob + "\" (the pattern matches no file; make one with `feedtune gen-data "
                                   "--layout tar --out DIR ...`)");
  std::ofstream(dir_ / "b-1.tar") << "";
  EXPECT_EQ(LoadErrorOf(path), "no error");
  // One string is checked the same way, a glob included.
  const std::string one = Write("o.yaml", "workload:\n  kind: tar\n  path: \"" + (dir_ / "c-*.tar").string() + "\"\n");
  EXPECT_EQ(LoadErrorOf(one), one + ":3:9: workload.path: expected a tar shard, directory or glob, got \"" +
                                  (dir_ / "c-*.tar").string() + "\" (the pattern matches no file; make one with "
                                  "`feedtune gen-data --layout tar --out DIR ...`)");
  const std::string empty = (dir_ / "empty").string();
  const std::string dir_path =
      Write("d.yaml", "workload:\n  kind: tfrecord\n  path: [" + a + ", " + empty + "]\n");
  EXPECT_EQ(LoadErrorOf(dir_path),
            dir_path + ":3:" + std::to_string(12 + a.size()) + ": workload.path[1]: expected a TFRecord file, "
                       "directory or glob, got \"" + empty + "\" (the directory holds no .tfrecord or .tfrec file; "
                       "make one with `feedtune gen-data --layout tfrecord --out DIR ...`)");
}

TEST_F(ConfigFileTest, DecodeJpegNeedsJpegsInTheDirectory) {
  const std::string data = (dir_ / "imgs").string();
  std::filesystem::create_directories(data + "/sub");
  std::ofstream(data + "/sub/notes.txt") << "x";
  const std::string path =
      Write("j.yaml", "workload:\n  kind: files\n  path: " + data + "\n  layout: files\n  decode: jpeg\n");
  EXPECT_EQ(LoadErrorOf(path),
            path + ":3:9: workload.path: expected a directory holding JPEG images (files named *.jpg, *.jpeg or "
                   "*.jpe, in any folder under it) when workload.decode is jpeg, got \"" + data +
                "\" (none there; make one with `feedtune gen-data --out " + data + " --layout jpeg ...`)");
  std::ofstream(data + "/.hidden.jpg") << "x";  // dot-files are skipped, as the dataset skips them
  EXPECT_NE(LoadErrorOf(path), "no error");
  std::ofstream(data + "/sub/a.JPEG") << "x";
  EXPECT_EQ(LoadErrorOf(path), "no error");
}

TEST(ConfigTest, FilesAndCommandKinds) {
  const SweepConfig files = ParseConfig(
      "workload:\n  kind: files\n  path: data/my shards\n  layout: files\n  io: mmap\n"
      "  cache: cold\n  cpu_us_per_sample: 50\n  cpu_threads: 3\n  fault: {kind: throw, at_sample: 7}\n",
      "x.yaml");
  EXPECT_EQ(files.workload.kind, WorkloadKind::kFiles);
  EXPECT_EQ(files.workload.files.path, "data/my shards");
  EXPECT_EQ(files.workload.files.layout, FilesLayout::kFiles);
  EXPECT_EQ(files.workload.files.io, FilesIo::kMmap);
  EXPECT_EQ(files.workload.files.cache, CacheMode::kCold);
  EXPECT_EQ(files.workload.synthetic.cpu_us_per_sample, 50);
  EXPECT_EQ(files.workload.synthetic.cpu_threads, 3);  // every native dataset splits its CPU work (sample_cost.h)
  EXPECT_EQ(files.workload.synthetic.fault.kind, FaultKind::kThrow);
  EXPECT_EQ(files.workload.synthetic.fault.at_sample, 7);
  const std::string files_yaml = ToYaml(files);
  EXPECT_TRUE(files_yaml.starts_with(
            "name: unnamed\n"
            "workload:\n"
            "  kind: files\n"
            "  path: data/my shards\n"
            "  layout: files\n"
            "  io: mmap\n"
            "  cache: cold\n"
            "  cpu_us_per_sample: 50\n"
            "  cpu_threads: 3\n"
            "  jitter: 0.1\n"
            "  worker_init_us: 0\n"
            "  torch_costs: auto\n"
            "  fault: {kind: throw, at_sample: 7}\n"
            "  seed: 0\n"
            "loader:\n"
            "  batch_size: 64\n"
            "  shuffle: true\n"
            "  drop_last: true\n"
            "  worker_mode: process\n"))
      << files_yaml;
  ExpectSameConfig(ParseConfig(ToYaml(files), "rt.yaml"), files);

  const SweepConfig command = ParseConfig(
      "workload:\n  kind: command\n"
      "  argv: [python3, probe.py, --workers, \"{num_workers}\", '{\"a\": 1}', \"\", \"null\", 4, true]\n"
      "  timeout_s: 60\n",
      "x.yaml");
  EXPECT_EQ(command.workload.kind, WorkloadKind::kCommand);
  EXPECT_EQ(command.workload.command.argv,
            (std::vector<std::string>{"python3", "probe.py", "--workers", "{num_workers}",
                                      "{\"a\": 1}", "", "null", "4", "true"}));
  EXPECT_EQ(command.workload.command.timeout_s, 60.0);
  const std::string yaml = ToYaml(command);
  EXPECT_NE(yaml.find("workload:\n  kind: command\n  argv: [python3, probe.py, --workers, "
                      "\"{num_workers}\", \"{\\\"a\\\": 1}\", \"\", \"null\", \"4\", \"true\"]\n"
                      "  timeout_s: 60.0\n  protocol: run\n  remote_reads: false\nloader:\n"),
            std::string::npos)
      << yaml;
  ExpectSameConfig(ParseConfig(yaml, "rt.yaml"), command);
  EXPECT_EQ(ToYaml(ParseConfig(yaml, "rt.yaml")), yaml);
}

TEST(ConfigTest, SampleSizeDistributions) {
  const SweepConfig lognormal = ParseConfig(
      "workload:\n  sample_bytes: {dist: lognormal, mean: 150528, sigma: 0.5}\n", "x.yaml");
  const auto& size = lognormal.workload.synthetic.size;
  EXPECT_EQ(size.dist, SizeDist::kLognormal);
  EXPECT_EQ(size.mean, 150528);
  EXPECT_EQ(size.sigma, 0.5);
  EXPECT_EQ(size.min, 1);
  // exp(ln(150528) - 0.125 + 4 * 0.5): above all but 3 in 100,000 draws.
  EXPECT_EQ(size.max, 981566);
  EXPECT_EQ(lognormal.workload.synthetic.sample_bytes, size.max);  // sizes the slots
  EXPECT_NE(ToYaml(lognormal).find(
                "  sample_bytes: {dist: lognormal, mean: 150528, sigma: 0.5, min: 1, max: 981566}\n"),
            std::string::npos);
  ExpectSameConfig(ParseConfig(ToYaml(lognormal), "rt.yaml"), lognormal);

  const SweepConfig uniform = ParseConfig(
      "workload:\n  sample_bytes:\n    dist: uniform\n    min: 1000\n    max: 5000\n", "x.yaml");
  EXPECT_EQ(uniform.workload.synthetic.size.dist, SizeDist::kUniform);
  EXPECT_EQ(uniform.workload.synthetic.sample_bytes, 5000);
  EXPECT_NE(ToYaml(uniform).find("  sample_bytes: {dist: uniform, min: 1000, max: 5000}\n"),
            std::string::npos);
  ExpectSameConfig(ParseConfig(ToYaml(uniform), "rt.yaml"), uniform);

  // Back to a fixed size with --set.
  SweepConfig fixed = uniform;
  ApplyOverride(fixed, "workload.sample_bytes=4096");
  EXPECT_EQ(fixed.workload.synthetic.size.dist, SizeDist::kFixed);
  EXPECT_EQ(fixed.workload.synthetic.sample_bytes, 4096);
}

// ---------------------------------------------------------------------------
// ApplyOverride.

TEST(ConfigOverrideTest, SetsValues) {
  SweepConfig config;
  ApplyOverride(config, "loader.num_workers=4");
  ApplyOverride(config, "sweep.prefetch_factors=[2, 4]");
  ApplyOverride(config, "device.host_sim={h2d_gbps_pinned: 3}");
  ApplyOverride(config, "sweep.max_workers=8");
  ApplyOverride(config, " loader.pin_memory = true ");
  ApplyOverride(config, "name=run-2");
  EXPECT_EQ(config.loader.knobs.num_workers, 4);
  EXPECT_EQ(config.sweep.prefetch_factors, (std::vector<int>{2, 4}));
  EXPECT_EQ(config.device.host_sim.h2d_gbps_pinned, 3.0);
  EXPECT_EQ(config.device.host_sim.h2d_gbps_pageable, 8.0);  // untouched sibling
  EXPECT_EQ(config.sweep.max_workers, 8);
  EXPECT_TRUE(config.loader.knobs.pin_memory);
  EXPECT_EQ(config.name, "run-2");
  ApplyOverride(config, "sweep.max_workers=auto");
  EXPECT_EQ(config.sweep.max_workers, 0);
}

TEST(ConfigOverrideTest, RejectsBadValuesAndKeepsConfig) {
  SweepConfig config;
  EXPECT_EQ(OverrideErrorOf(config, "loader.num_workers=abc"),
            "--set loader.num_workers=abc: loader.num_workers: expected an integer in [0, 1024], "
            "got \"abc\"");
  EXPECT_EQ(OverrideErrorOf(config, "loader.num_workers=2000"),
            "--set loader.num_workers=2000: loader.num_workers: expected an integer in [0, 1024], "
            "got 2000");
  EXPECT_EQ(
      OverrideErrorOf(config, "loader.batch_size="),
      "--set loader.batch_size=: loader.batch_size: expected an integer in [1, 65536], got null");
  EXPECT_EQ(OverrideErrorOf(config, "sweep.prefetch_factors=[1, 0]"),
            "--set sweep.prefetch_factors=[1, 0]: sweep.prefetch_factors[1]: expected an integer "
            "in [1, 64], "
            "got 0");
  EXPECT_EQ(
      OverrideErrorOf(config, "loader={batch_size: 8, shuffle: maybe}"),
      "--set loader={batch_size: 8, shuffle: maybe}: loader.shuffle: expected true or false, got "
      "\"maybe\"");
  ExpectSameConfig(config, SweepConfig());  // nothing half-applied
}

TEST(ConfigOverrideTest, RejectsBadKeys) {
  SweepConfig config;
  EXPECT_EQ(
      OverrideErrorOf(config, "loader.num_worker=4"),
      "--set loader.num_worker=4: loader.num_worker: unknown key; did you mean 'num_workers'?");
  EXPECT_EQ(OverrideErrorOf(config, "lodaer.num_workers=4"),
            "--set lodaer.num_workers=4: lodaer: unknown key; did you mean 'loader'?");
  EXPECT_EQ(OverrideErrorOf(config, "loader.batch_size.x=4"),
            "--set loader.batch_size.x=4: loader.batch_size.x: unknown key; loader.batch_size is a "
            "value, "
            "not a section");
  EXPECT_EQ(OverrideErrorOf(config, "loader.num_workers"),
            "--set loader.num_workers: expected key.path=value, got no '='");
  EXPECT_EQ(OverrideErrorOf(config, "loader..x=1"),
            "--set loader..x=1: expected key.path=value, got an empty name in \"loader..x\"");
  EXPECT_EQ(OverrideErrorOf(config, "loader.batch_size=[1,"),
            "--set loader.batch_size=[1,: loader.batch_size: invalid YAML value: end of sequence "
            "flow not "
            "found");
}

TEST(ConfigOverrideTest, ChecksAcrossKeys) {
  SweepConfig config =
      ParseConfig("workload: {samples: 10}\nloader: {drop_last: false}\n", "x.yaml");
  EXPECT_EQ(OverrideErrorOf(config, "loader.drop_last=true"),
            "--set loader.drop_last=true: loader.drop_last: expected workload.samples >= "
            "loader.batch_size "
            "when loader.drop_last is true (else an epoch has no batch), got 10 < 64");
  EXPECT_FALSE(config.loader.drop_last);
}

// ---------------------------------------------------------------------------
// WorkloadHash.

TEST(ConfigHashTest, StableAndScopedToTheWorkload) {
  const SweepConfig base;
  const std::string hash = WorkloadHash(base);
  ASSERT_EQ(hash.size(), 16u);
  EXPECT_EQ(hash.find_first_not_of("0123456789abcdef"), std::string::npos);
  // Pinned: results stores on other machines compare by this value.
  EXPECT_EQ(hash, "e926d0ef7bbc744a");

  SweepConfig same = ParseConfig(
      "name: other\nloader: {num_workers: 8, pin_memory: true}\n"
      "sweep: {repeats: 5}\n",
      "y.yaml");
  EXPECT_EQ(WorkloadHash(same), hash);  // name, tuned knobs and sweep settings excluded

  SweepConfig bigger = base;
  bigger.workload.synthetic.sample_bytes += 1;
  EXPECT_NE(WorkloadHash(bigger), hash);

  SweepConfig slower_step = base;
  slower_step.device.step_us += 1;
  EXPECT_NE(WorkloadHash(slower_step), hash);

  SweepConfig no_shuffle = base;
  no_shuffle.loader.shuffle = false;
  EXPECT_NE(WorkloadHash(no_shuffle), hash);

  SweepConfig faulty = base;
  faulty.workload.synthetic.fault = {.kind = FaultKind::kThrow, .at_sample = 1};
  EXPECT_NE(WorkloadHash(faulty), hash);

  // Keys of other kinds do not count; the dataset's path (where this machine
  // keeps it) does not either, but how it is read does.
  SweepConfig synthetic_with_stale_path = base;
  synthetic_with_stale_path.workload.files.path = "x";
  EXPECT_EQ(WorkloadHash(synthetic_with_stale_path), hash);
  SweepConfig files = base;
  files.workload.kind = WorkloadKind::kFiles;
  files.workload.files.path = "/data/a";
  SweepConfig files_elsewhere = files;
  files_elsewhere.workload.files.path = "/mnt/b";
  EXPECT_EQ(WorkloadHash(files_elsewhere), WorkloadHash(files));
  SweepConfig files_cold = files;
  files_cold.workload.files.cache = CacheMode::kCold;
  EXPECT_NE(WorkloadHash(files_cold), WorkloadHash(files));
}

TEST(ConfigOverrideTest, WorkloadKeys) {
  SweepConfig config;
  ApplyOverride(config, "workload.fault={kind: hang, at_sample: 2}");
  EXPECT_EQ(config.workload.synthetic.fault.kind, FaultKind::kHang);
  ApplyOverride(config, "workload.fault=null");
  EXPECT_EQ(config.workload.synthetic.fault.kind, FaultKind::kNone);
  EXPECT_EQ(OverrideErrorOf(config, "workload.fault={kind: nope}"),
            "--set workload.fault={kind: nope}: workload.fault.kind: expected one of "
            "throw|exit|abort|segv|hang, got \"nope\"");
  ApplyOverride(config, "workload={kind: command, argv: [sh, -c, 'echo {}']}");
  EXPECT_EQ(config.workload.kind, WorkloadKind::kCommand);
  EXPECT_EQ(OverrideErrorOf(config, "workload.path=x"),
            "--set workload.path=x: workload.path: unknown key for workload.kind command (it is for "
            "files, npy, hdf5, lmdb, tfrecord and tar)");
}

// workload.protocol: run (one process per repeat, the default) or serve (one
// process per sweep, knobs on stdin; docs/command-protocol.md).
TEST(ConfigTest, CommandProtocol) {
  const std::string base = "workload:\n  kind: command\n  argv: [python3, probe.py, --serve]\n";
  EXPECT_EQ(ParseConfig(base, "x.yaml").workload.command.protocol, feedtune::workloads::CommandProtocol::kRun);
  const SweepConfig served = ParseConfig(base + "  protocol: serve\n", "x.yaml");
  EXPECT_EQ(served.workload.command.protocol, feedtune::workloads::CommandProtocol::kServe);
  // Printed with the other command keys, and read back the same.
  const std::string yaml = ToYaml(served);
  EXPECT_NE(yaml.find("  protocol: serve\n"), std::string::npos) << yaml;
  EXPECT_EQ(ParseConfig(yaml, "y.yaml").workload.command.protocol, feedtune::workloads::CommandProtocol::kServe);
  EXPECT_NE(ToYaml(ParseConfig(base, "x.yaml")).find("  protocol: run\n"), std::string::npos);
  // How the command is driven is not what it measures: the workload hash stays.
  EXPECT_EQ(WorkloadHash(served), WorkloadHash(ParseConfig(base, "x.yaml")));
  // The sweep's own placeholders stay allowed with serve: they are the same for every trial.
  EXPECT_EQ(ErrorOf(base + "  protocol: serve\n  timeout_s: 60\n"), "no error");
  EXPECT_EQ(ErrorOf("workload:\n  kind: command\n  argv: [p, '{measure_seconds}', '{step_us}']\n  protocol: serve\n"),
            "no error");
}

TEST(ConfigErrorTest, CommandProtocol) {
  EXPECT_EQ(ErrorOf("workload:\n  kind: command\n  argv: [p]\n  protocol: srve\n"),
            "x.yaml:4:13: workload.protocol: expected one of run|serve, got \"srve\"; did you mean 'serve'?");
  EXPECT_EQ(ErrorOf("workload:\n  kind: command\n  argv: [p]\n  protocol: 1\n"),
            "x.yaml:4:13: workload.protocol: expected one of run|serve, got 1");
  EXPECT_EQ(ErrorOf("workload:\n  kind: synthetic\n  protocol: serve\n"),
            "x.yaml:3:13: workload.protocol: unknown key for workload.kind synthetic (it is for command)");
  // A serving command starts once: a knob placeholder would hold the first trial's value.
  EXPECT_EQ(ErrorOf("workload:\n  kind: command\n  protocol: serve\n  argv: [p, --n, '{num_workers}']\n"),
            "x.yaml:4:18: workload.argv[2]: expected no per-trial placeholder when workload.protocol is serve "
            "(the serving command gets each trial's knobs on stdin, see docs/command-protocol.md), got "
            "{num_workers}; remove it from argv, or use protocol: run");
  EXPECT_EQ(ErrorOf("workload:\n  kind: command\n  argv: [p, '--b={batch_size}']\n  protocol: serve\n"),
            "x.yaml:3:13: workload.argv[1]: expected no per-trial placeholder when workload.protocol is serve "
            "(the serving command gets each trial's knobs on stdin, see docs/command-protocol.md), got "
            "{batch_size}; remove it from argv, or use protocol: run");
}

TEST(ConfigOverrideTest, CommandProtocol) {
  SweepConfig config = ParseConfig("workload:\n  kind: command\n  argv: [p, '{pin_memory}']\n", "x.yaml");
  EXPECT_EQ(OverrideErrorOf(config, "workload.protocol=serve"),
            "--set workload.protocol=serve: workload.argv[1]: expected no per-trial placeholder when "
            "workload.protocol is serve (the serving command gets each trial's knobs on stdin, see "
            "docs/command-protocol.md), got {pin_memory}; remove it from argv, or use protocol: run");
  EXPECT_EQ(config.workload.command.protocol, feedtune::workloads::CommandProtocol::kRun);  // left as it was
  ApplyOverride(config, "workload.argv=[p, --serve]");
  ApplyOverride(config, "workload.protocol=serve");
  EXPECT_EQ(config.workload.command.protocol, feedtune::workloads::CommandProtocol::kServe);
  EXPECT_EQ(OverrideErrorOf(config, "workload.protocol=stream"),
            "--set workload.protocol=stream: workload.protocol: expected one of run|serve, got \"stream\"");
  ApplyOverride(config, "workload.protocol=run");
  EXPECT_EQ(config.workload.command.protocol, feedtune::workloads::CommandProtocol::kRun);
}

// The format kinds (npy, hdf5, lmdb): their keys, defaults, round trip and hash.
TEST(ConfigTest, FormatKinds) {
  const SweepConfig h5 = ParseConfig(
      "workload:\n  kind: hdf5\n  path: d.h5\n  dataset: /x\n  labels: /y\n  hdf5:\n    chunk_cache_mb: 200\n",
      "x.yaml");
  EXPECT_EQ(h5.workload.kind, WorkloadKind::kHdf5);
  EXPECT_EQ(h5.workload.files.path, "d.h5");
  EXPECT_EQ(h5.workload.format.dataset, "/x");
  EXPECT_EQ(h5.workload.format.labels, "/y");
  EXPECT_EQ(h5.workload.format.hdf5_chunk_cache_mb, 200);
  const std::string yaml = ToYaml(h5);
  EXPECT_NE(yaml.find("  hdf5: {chunk_cache_mb: 200}\n"), std::string::npos) << yaml;
  EXPECT_EQ(ToYaml(ParseConfig(yaml, "y.yaml")), yaml);
  // Defaults: /images, no labels (null, read back as none), HDF5's own 1 MiB cache.
  const SweepConfig plain = ParseConfig("workload: {kind: hdf5, path: d.h5}\n", "x.yaml");
  EXPECT_EQ(plain.workload.format.dataset, "/images");
  EXPECT_EQ(plain.workload.format.labels, "");
  EXPECT_EQ(plain.workload.format.hdf5_chunk_cache_mb, 1);
  EXPECT_NE(ToYaml(plain).find("  labels: null\n"), std::string::npos) << ToYaml(plain);
  EXPECT_EQ(ToYaml(ParseConfig(ToYaml(plain), "y.yaml")), ToYaml(plain));
  // The chunk cache changes what is measured: a different workload.
  EXPECT_NE(WorkloadHash(plain), WorkloadHash(h5));

  const SweepConfig lmdb = ParseConfig("workload: {kind: lmdb, path: e, lmdb: {readahead: true}, cache: cold}\n", "x.yaml");
  EXPECT_TRUE(lmdb.workload.format.lmdb_readahead);
  EXPECT_EQ(lmdb.workload.files.cache, CacheMode::kCold);
  EXPECT_EQ(ToYaml(ParseConfig(ToYaml(lmdb), "y.yaml")), ToYaml(lmdb));
  const SweepConfig npy = ParseConfig("workload: {kind: npy, path: a.npy, io: mmap, cpu_us_per_sample: 0}\n", "x.yaml");
  EXPECT_EQ(npy.workload.files.io, FilesIo::kMmap);
  EXPECT_EQ(ToYaml(ParseConfig(ToYaml(npy), "y.yaml")), ToYaml(npy));
  ApplyOverride(const_cast<SweepConfig&>(h5), "workload.hdf5.chunk_cache_mb=0");
  EXPECT_EQ(h5.workload.format.hdf5_chunk_cache_mb, 0);
}

TEST(ConfigErrorTest, FormatKinds) {
  EXPECT_EQ(ErrorOf("workload:\n  kind: npy\n"),
            "x.yaml:2:9: workload.kind: expected workload.path, the .npy file, when workload.kind is npy (make "
            "one with `feedtune gen-data --layout npy`), got none");
  EXPECT_EQ(ErrorOf("workload:\n  kind: npy\n  path: a.npy\n  dataset: /x\n"),
            "x.yaml:4:12: workload.dataset: unknown key for workload.kind npy (it is for hdf5)");
  EXPECT_EQ(ErrorOf("workload:\n  kind: lmdb\n  path: e\n  io: mmap\n"),
            "x.yaml:4:7: workload.io: unknown key for workload.kind lmdb (it is for files and npy)");
  EXPECT_EQ(ErrorOf("workload:\n  kind: hdf5\n  path: a.h5\n  hdf5: {chunk_cache_mb: -1}\n"),
            "x.yaml:4:26: workload.hdf5.chunk_cache_mb: expected an integer in [0, 1048576], got -1");
  EXPECT_EQ(ErrorOf("workload:\n  kind: hdf5\n  path: a.h5\n  hdf5: {chunk_cache: 4}\n"),
            "x.yaml:4:10: workload.hdf5.chunk_cache: unknown key; allowed keys: chunk_cache_mb");
  EXPECT_EQ(ErrorOf("workload:\n  kind: hdf5\n  path: a.h5\n  labels: \"\"\n"),
            "x.yaml:4:11: workload.labels: expected null or a non-empty string, got \"\"");
  EXPECT_EQ(ErrorOf("workload:\n  kind: lmdb\n  path: e\n  lmdb: {readahead: yes}\n"),
            "x.yaml:4:21: workload.lmdb.readahead: expected true or false, got \"yes\"");
  // Thread-mode workers would measure libhdf5's global lock.
  EXPECT_EQ(ErrorOf("workload: {kind: hdf5, path: a.h5}\nloader:\n  worker_mode: thread\n"),
            "x.yaml:3:16: loader.worker_mode: expected process when workload.kind is hdf5, got thread: Debian's "
            "libhdf5 is built thread-safe by one global lock around every call, so thread-mode workers would "
            "measure that lock, not the storage (PyTorch's workers are processes too)");
}

TEST(ConfigErrorTest, FormatInputsMustExist) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("feedtune-config-formats-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string config = (dir / "c.yaml").string();
  std::ofstream(config) << "workload:\n  kind: npy\n  path: " << (dir / "none.npy").string() << "\n";
  try {
    LoadConfig(config);
    ADD_FAILURE() << "loaded";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), config + ":3:9: workload.path: expected a .npy file, got \"" +
                                         (dir / "none.npy").string() +
                                         "\" (No such file or directory; make one with `feedtune gen-data "
                                         "--layout npy --out " +
                                         (dir / "none.npy").string() + " ...`)");
  }
  std::ofstream(config) << "workload:\n  kind: hdf5\n  path: " << dir.string() << "\n";
  try {
    LoadConfig(config);
    ADD_FAILURE() << "loaded";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              config + ":3:9: workload.path: expected an HDF5 file, got \"" + dir.string() + "\" (a directory)");
  }
  std::filesystem::remove_all(dir);
}

// docs/config.md is generated from the key table (feedtune config-keys, make
// config-docs): a key added, renamed or given another range or default without
// regenerating it fails here, so the reference never drifts from the parser.
TEST(ConfigKeysTest, DocsConfigMdIsWhatTheKeyTableProduces) {
  using feedtune::tuner::KeyReferenceMarkdown;
  const std::string path = std::string(FEEDTUNE_SOURCE_DIR) + "/docs/config.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path << " is missing: run `make config-docs`";
  const std::string committed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(committed, KeyReferenceMarkdown()) << path << " differs from the key table: run `make config-docs`";
}

TEST(ConfigKeysTest, EveryKeyIsOneRowWithWhatItTakesAndItsDefault) {
  using feedtune::tuner::KeyReferenceMarkdown;
  const std::string md = KeyReferenceMarkdown();
  EXPECT_NE(md.find("| `loader.num_workers` | an integer in [0, "), std::string::npos) << md;
  EXPECT_NE(md.find("| `sweep.repeats` | an integer in [1, "), std::string::npos) << md;
  // The enum keys list the choices the parser takes (the README once said none | split).
  EXPECT_NE(md.find("| `sweep.cpu_binding` | one of auto\\|none\\|split\\|numa | `auto`"), std::string::npos) << md;
}

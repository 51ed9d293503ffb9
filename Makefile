# The two commands of the README, and the helpers around them.
#   make sweep   set up, build (Release), run the quickstart sweep into results/feedtune.db
#   make test    set up, build, run the test suite (every tier)
#   make check   the unit tier only, while editing (docs/development.md)
BUILD ?= build
JOBS ?= $(shell nproc)
# Tests run two per CPU: much of the slow tier waits (child processes
# starting, timeouts, kills; -j2 on 2 CPUs kept them 66% busy, 2026-12-03),
# and the perf tests, whose ratios need the CPUs, run alone (RUN_SERIAL).
TEST_JOBS ?= $(shell echo $$((2 * $$(nproc))))
CMAKE_FLAGS ?=
# Unity builds (CMake's CMAKE_UNITY_BUILD: a folder's sources compiled 8 to a
# translation unit) halve a cold build's CPU (docs/development.md#ci); an edit
# then recompiles its batch, so UNITY=OFF suits a long edit loop in a build
# folder of its own.
UNITY ?= ON
CONFIGURE_FLAGS = -DCMAKE_UNITY_BUILD=$(UNITY) $(CMAKE_FLAGS)

.PHONY: all deps build sweep test check deb build-asan test-asan build-tsan test-tsan fuzz-build fuzz bench grid-vs-sweep regret in-job-bench native-vs-torch probe-protocol formats-bench layout-bench remote-bench remote-job-bench fleet-scale seed-bench node-bench trace-bench busy-box-bench clean

all: build

deps:
	@scripts/setup-deps

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CONFIGURE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

sweep: build
	$(BUILD)/tuner/cli/feedtune sweep configs/quickstart.yaml --db results/feedtune.db

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(TEST_JOBS)

# The Debian package: $(BUILD)/feedtune_<version>_<arch>.deb (CPack DEB;
# docs/development.md#install-and-package). Then: apt install ./$(BUILD)/feedtune_*.deb
deb: build
	cd $(BUILD) && cpack -G DEB

# docs/config.md from the config key table (a test fails when they differ).
.PHONY: config-docs
config-docs: build
	$(BUILD)/tuner/cli/feedtune config-keys > docs/config.md

# The unit tier: in process, scripted measurers, no sweep through the binary.
check: build
	cd $(BUILD) && ctest --output-on-failure -j $(TEST_JOBS) -L unit

# Under sanitizers (separate build folders): the whole suite with ASan+UBSan
# but the tests labelled no-sanitizers (Python and packaging tests over native
# paths the C++ suites drive: tests/python/CMakeLists.txt says which run), the
# loader and tuner suites with TSan, without the perf label (knees and ratios
# mean nothing at TSan's 5-15x slowdown).
build-asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DFEEDTUNE_SANITIZE=address,undefined -DFEEDTUNE_WITH_CUDA=OFF -DFEEDTUNE_BUILD_BENCH=OFF $(CONFIGURE_FLAGS) >/dev/null
	@cmake --build build-asan -j $(JOBS)

# Two per CPU, as make test: the suite waits as much under the sanitizers
# (child processes, sleeps, a store's round trips), and its perf tests run alone.
test-asan: build-asan
	cd build-asan && ctest --output-on-failure -j $(TEST_JOBS) -LE no-sanitizers

build-tsan: deps
	@cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DFEEDTUNE_SANITIZE=thread -DFEEDTUNE_WITH_CUDA=OFF -DFEEDTUNE_BUILD_BENCH=OFF $(CONFIGURE_FLAGS) >/dev/null
	@cmake --build build-tsan -j $(JOBS) --target $(TSAN_TARGETS)

# TSan runs the loader and tuner suites (labels loader, tuner): only their
# executables (and the binary they run) are built there.
TSAN_TARGETS = loader_tests config_tests tuner_tests node_tests formula_trials_tests diagnose_tests feedtune

test-tsan: build-tsan
	cd build-tsan && ctest --output-on-failure -j 1 -L 'loader|tuner' -LE perf

# libFuzzer targets (clang, ASan+UBSan, build-fuzz), FUZZ_SECONDS each on their seed corpora.
FUZZ_SECONDS ?= 60
fuzz-build:
	@scripts/setup-deps --fuzz
	UNITY=$(UNITY) JOBS=$(JOBS) scripts/ci-fuzz --build-only

fuzz: fuzz-build
	UNITY=$(UNITY) JOBS=$(JOBS) scripts/ci-fuzz $(FUZZ_SECONDS)

bench: build
	$(BUILD)/bench/feedtune_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true

# The sweep against the full grid on synthetic cpu-bound and io-bound loads
# (about 7 minutes on 2 cores): trials used by each, best throughput of each,
# their ratio; exits 1 when the sweep misses a target.
grid-vs-sweep: build
	bench/grid_vs_sweep --feedtune $(BUILD)/tuner/cli/feedtune

# The sweep's choice against the exhaustive grid on six real torch DataLoader
# profiles (command workload + feedtune_probe.py; about 20-30 minutes on 2
# CPUs); exits 1 when a regret exceeds 5%.
regret: build
	bench/regret --feedtune $(BUILD)/tuner/cli/feedtune

# feedtune.autotune inside a job (the CNN job and a wait-bound dataset)
# against every candidate timed in the same process, interleaved: regret,
# the tuning's cost, the job's speedup (about 8 minutes on 2 CPUs; alone).
in-job-bench: build
	FEEDTUNE_BIN=$(BUILD)/tuner/cli/feedtune bench/in_job

# Native trials with and without this box's torch costs (feedtune calibrate)
# against torch's DataLoader, 0 to 32 workers, on four profiles (tiny, 1 ms
# CPU, a 10 ms wait, a JPEG folder through PIL + torchvision, installed by
# setup-deps --bench): each curve's peak and what torch loses at the native
# peaks (about 12 minutes on 2 CPUs; alone).
native-vs-torch: build
	@scripts/setup-deps --bench
	bench/native_vs_torch --feedtune $(BUILD)/tuner/cli/feedtune

# configs/torch-probe.yaml swept with protocol run and serve side by side;
# prints the wall-time ratio serve/run (target <= 0.6) and both decisions.
probe-protocol: build
	bench/probe_protocol --feedtune $(BUILD)/tuner/cli/feedtune

# The same gen-data files (npy, HDF5, LMDB, JPEG) through torch's DataLoader
# (numpy memmap, h5py, python3-lmdb, PIL + torchvision, installed by
# setup-deps --bench) and through feedtune trial: per-sample cost on one core,
# samples/s over num_workers, each peak (about 4 minutes on 2 CPUs;
# FORMATS_ARGS=--long for longer); exits 1 when a target is missed.
formats-bench: build
	@scripts/setup-deps --bench
	bench/formats.py --feedtune $(BUILD)/tuner/cli/feedtune $(FORMATS_ARGS)

# `feedtune sweep` on an s3:// dataset of the project's own store (scripts/s3-rig,
# installed by setup-deps --s3) at 0, 20 and 80 ms to the first byte, against
# an interleaved grid of num_workers x fetch_concurrency: the named setting's
# share of the grid's best (goal: within 5%) and its worker processes against
# the best's (docs/storage.md#bench-remote; about 20 minutes on 2 CPUs, alone).
remote-bench: build
	@scripts/setup-deps --s3
	bench/remote --feedtune $(BUILD)/tuner/cli/feedtune $(REMOTE_ARGS)

# A torch job over feedtune.data.open("s3://...") with feedtune.autotune
# against the best num_workers x fetch_concurrency timed in its own process
# (docs/storage.md#benchremote_job). About 15 minutes.
remote-job-bench: build
	@scripts/setup-deps --s3
	bench/remote_job --feedtune $(BUILD)/tuner/cli/feedtune $(REMOTE_JOB_ARGS)

# `feedtune layout` against an exhaustive, interleaved cold measurement of
# every candidate on three gen-data datasets (a JPEG folder, small files, the
# HDF5 chunk trap): docs/layout.md#bench-layout. A few minutes on 2 CPUs.
layout-bench: build
	bench/layout --feedtune $(BUILD)/tuner/cli/feedtune $(LAYOUT_ARGS)

# 10,000 generated results files (copies of one real sweep rewritten into other
# hosts of 4 classes, with planted outliers) merged from a list under ulimit -n
# 1024, compared (table and HTML) and checked; prints each time (targets:
# merge <= 15 s, each compare <= 3 s), whether the planted outliers were found
# and listed first and whether a file appeared beside the inputs; exits 1 when
# missed, 2 when a command fails. FLEET_ARGS="--hosts 2000" for a shorter run.
fleet-scale: build
	bench/fleet_scale --feedtune $(BUILD)/tuner/cli/feedtune --nofile 1024 $(FLEET_ARGS)

# sweep --seed-from (docs/fleets.md): an unseeded sweep stored as another host,
# a sweep seeded from it, both choices re-measured interleaved; prints both
# trial counts (target: seeded <= half) and the choices' ratio (target: within
# 5%; about 30 s), exits 1 when missed.
seed-bench: build
	bench/seed_from --feedtune $(BUILD)/tuner/cli/feedtune --pairs 5

# A sweep on a busy box (docs/measurement.md): configs/cpu-bound.yaml and
# configs/io-bound.yaml swept quiet and beside a one-CPU hog (`yes`); prints
# each knee, best and the background the sweeps measured (goals: the hog's
# background within 10% of 1 CPU, its run marked busy, its decisions naming
# it; about 6 minutes on 2 CPUs, alone on the box), exits 1 when missed.
busy-box-bench: build
	bench/busy_box --feedtune $(BUILD)/tuner/cli/feedtune

# What the node harness costs (tuner/measure/node_measurer.h): N host-sim ranks in one node
# trial against N independent trials started together, on a wait-bound tiny
# workload; prints the cost (target <= 5%; about 2 minutes), exits 1 when missed.
node-bench: build
	bench/node_harness --feedtune $(BUILD)/tuner/cli/feedtune --ranks 2 --rounds 5

# Does recording a trace change what it records? `feedtune trial` without and
# with --trace, interleaved pairs on the worst case (a span every few us);
# prints both figures and their ratio (about 30 s).
trace-bench: build
	bench/trace_overhead.py --feedtune $(BUILD)/tuner/cli/feedtune --pairs 9

# Where the real torch DataLoader's knee lies on this machine (the probe,
# one serving process per curve): cpu-bound knee / usable CPUs (target <= 2)
# and wait-bound (target >= 4); about 30 s on 2 CPUs, alone on the machine;
# exits 1 when a target is missed. A step of scripts/ci-full.
.PHONY: knee-bench
knee-bench: build
	$(BUILD)/bench/feedtune_probe_knee_bench

# A 1e9-sample synthetic epoch (loader/sampler.h: the order computed on
# demand): time to the first batch and the sampler's memory, per worker mode
# (targets: under 1 s, under 16 MiB).
.PHONY: epoch-bench
epoch-bench: build
	$(BUILD)/bench/feedtune_epoch_bench

# Renders an HTML report to docs/report.png with headless Chromium (installed
# here only: scripts/setup-deps --chromium). DB=... picks the results file.
.PHONY: report-screenshot
report-screenshot: build
	@scripts/setup-deps --chromium
	scripts/report-screenshot --feedtune $(BUILD)/tuner/cli/feedtune $(if $(DB),--db $(DB)) --out docs/report.png

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz

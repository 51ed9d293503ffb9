// LoaderOptions: how the data loader is configured, in torch.utils.data.DataLoader's
// terms. The five tuned knobs (num_workers, pin_memory, non_blocking,
// prefetch_factor, persistent_workers) plus batch_size form Knobs, the unit the
// tuner varies and the results store records, with the two a node sweep tunes
// around the loader (cpu_binding, worker_threads) and a command's start method
// (multiprocessing_context). Plain values, their names and the short form.
#pragma once

#include <cstdint>
#include <string>

namespace feedtune::loader {

enum class WorkerMode { kProcess, kThread };

// Where a rank of a node sweep and its workers may run (tuner/measure/node_measurer.h): `none`
// keeps the inherited mask; `split` binds each rank to an equal, disjoint
// share of the usable CPUs; `numa` to its share of the CPUs on its GPU's NUMA
// node (split when that node is unknown).
enum class CpuBinding { kNone, kSplit, kNuma };

// How a Python DataLoader starts its workers (torch's multiprocessing_context),
// a knob of command workloads only: the native loader always forks from its
// fork server (docs/architecture.md) and ignores it. kDefault passes no context, so the
// workers start the interpreter's way (fork on Linux before Python 3.14,
// forkserver from 3.14); forkserver and spawn pickle the Dataset to each worker.
enum class StartMethod { kDefault, kFork, kForkserver, kSpawn };

// The settings a sweep varies, trial by trial. non_blocking belongs to the
// training loop's `.to(device, non_blocking=...)` call, not to the DataLoader,
// but users tune it together with the rest, so it travels here.
struct Knobs {
  int batch_size = 64;
  int num_workers = 0;
  bool pin_memory = false;
  bool non_blocking = false;
  int prefetch_factor = 2;
  bool persistent_workers = false;
  // Like non_blocking, these act around the DataLoader, not in it, and are
  // tuned with the rest (tuner/search/search.h), so they travel here too. The loader
  // ignores them; tuner/measure/node_measurer.cc applies the binding per trial, and the workload
  // splits a sample's CPU work over worker_threads (OMP_NUM_THREADS and
  // MKL_NUM_THREADS for a command). 0 = the workload's own (workload.cpu_threads;
  // for a command, the environment it inherits).
  CpuBinding cpu_binding = CpuBinding::kNone;
  int worker_threads = 0;
  // The workers' start method (command workloads; see StartMethod).
  StartMethod multiprocessing_context = StartMethod::kDefault;
  // Requests in flight per worker (or in the consumer without workers): a
  // batch's samples fetched together, up to this many at once, from a dataset
  // that reads concurrently (Dataset::reads_concurrently: an object store).
  // 1 = one sample after another, as torch's DataLoader reads them; others
  // ignore it. Not torch's knob: feedtune.data.open takes it in the job.
  int fetch_concurrency = 1;

  bool operator==(const Knobs&) const = default;
};

struct LoaderOptions {
  Knobs knobs;
  bool shuffle = true;
  bool drop_last = true;
  WorkerMode worker_mode = WorkerMode::kProcess;
  double timeout_s = 0;  // 0 = wait forever for a batch; else an error after this long
  uint64_t seed = 0;     // sampler seed; epoch e shuffles with (seed, e)
  // Data-parallel share (torch's DistributedSampler): this loader reads rank's
  // share of each epoch's order among world_size ranks (loader/sampler.h).
  int rank = 0;
  int world_size = 1;
  // A streaming dataset's per-worker shuffle buffer, in samples (loader/stream.h);
  // 0 or 1 reads each shard in order. Map-style datasets ignore it.
  int64_t shuffle_buffer = 0;
  bool trace = false;    // record spans into a TraceBuffer after the slots (loader/trace.h); armed by the caller
};

const char* WorkerModeName(WorkerMode mode);
const char* CpuBindingName(CpuBinding binding);  // "none", "split", "numa"
const char* StartMethodName(StartMethod method);  // "default", "fork", "forkserver", "spawn"
// The method named so, or false for a name this version does not know.
bool StartMethodFromName(const std::string& name, StartMethod* method);

// The knobs in one short line for progress and notes: "nw=4 pin=1 nb=0 pf=2 pers=0",
// then " bind=...", " thr=N" and " mp=spawn" only when set.
std::string KnobsShort(const Knobs& knobs);

}  // namespace feedtune::loader

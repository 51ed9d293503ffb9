// CPU work that stands in for decode/augment: a checksum pass over a sample's
// bytes, repeated until the calling thread has spent the requested CPU time.
//
// Time is read from CLOCK_THREAD_CPUTIME_ID, so workers sharing a core each pay
// their full cost, as real decode work does. That clock is a system call on
// most kernels (a few hundred ns), so how often it is read matters: Calibrate()
// measures, once at start-up, what one read costs and how many bytes per second
// the work loop processes on this machine, and picks the amount of work between
// reads so that clock reads stay a small part of the spent time while a sample
// overshoots its cost by no more than one chunk. The calibration is stored with
// the run (its facts, results/records.h: CpuCalibrationFacts) so results from
// different machines can be read side by side. The work may be split over
// intra-op threads (BurnCpuThreads), as the trial's worker_threads asks.
//
// CpuCalibration is a plain value: copy it into whatever needs it (datasets
// keep one; forked workers inherit it). All functions are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace feedtune::workloads {

struct CpuCalibration {
  double clock_read_ns = 0;      // one read of CLOCK_THREAD_CPUTIME_ID
  double work_bytes_per_s = 0;   // throughput of the work loop over in-cache data
  size_t chunk_bytes = 4096;     // work between two clock reads
  double chunk_us = 0;           // ... which takes this long
  double clock_overhead = 0;     // share of spent time that goes to reading the clock
  // Self-check: a burn of check_requested_us measured from outside.
  double check_requested_us = 0;
  double check_spent_us = 0;
  double calibration_s = 0;      // how long calibrating took
};

// Measures this machine (about 50 ms of CPU). Call once, before forking workers.
CpuCalibration Calibrate();

// This thread's CPU time in nanoseconds.
int64_t ThreadCpuNs();

// Burns `ns` of this thread's CPU time doing checksum work over `data` (which
// may be empty: then a small internal buffer is used). Returns the checksum so
// callers can keep it observable.
uint64_t BurnCpu(int64_t ns, std::span<const std::byte> data, const CpuCalibration& calibration);

// BurnCpu split over `threads` threads, as an OpenMP or OpenCV loop inside a
// transform splits its work: the caller burns its share and threads - 1
// helpers, started for the sample, burn theirs (each ns / threads of its own
// CPU time); then the caller waits for them spinning, for up to 200 us, as
// OpenMP's active wait policy does, before blocking. So threads beyond the
// free cores cost what they cost there: helpers queue for a core while the
// others spin, and each sample pays the helpers' start. threads <= 1: BurnCpu.
uint64_t BurnCpuThreads(int64_t ns, std::span<const std::byte> data, const CpuCalibration& calibration,
                        int threads);

// The intra-op threads a sample's CPU work uses in this process tree, as
// OMP_NUM_THREADS sets them for OpenMP: 0 = each dataset's own
// (workload.cpu_threads). The value lives in a shared mapping made by the
// first call of either function, so workers forked later (from a fork server
// forked after that call) read what this process sets afterwards: the tuner
// sets it per trial (Knobs::worker_threads). Datasets make the mapping when
// constructed, before their fork server exists.
void SetIntraOpThreads(int threads);
int IntraOpThreads();
// The threads a dataset's sample uses: the trial's setting when one is set,
// else the dataset's own (`own`: workload.cpu_threads).
inline int IntraOpThreadsOr(int own) { return IntraOpThreads() > 0 ? IntraOpThreads() : own; }

}  // namespace feedtune::workloads

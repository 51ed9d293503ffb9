// Merging results files (`feedtune merge`, docs/fleets.md): the runs of many
// files, one per host of a fleet, gathered into one.
//
// A fleet has thousands of inputs, so the merge reads them one at a time:
// each is opened, copied and closed before the next, and the process holds
// the output's descriptors and one input's whatever their number (the default
// soft limit, ulimit -n, is often 1024). Inputs are only read, and opened so
// that nothing is created beside them: a folder of inputs on a read-only
// share merges, and the folder holds the same files afterwards.
#pragma once

#include <string>

#include "results/store.h"

namespace feedtune::results {

// What MergeInto did.
struct MergeStats {
  int machines_added = 0;
  int runs_added = 0;
  int runs_updated = 0;  // copies of runs that were still running, replaced by their finished form
  int runs_skipped = 0;  // already here, unchanged
  int trials_added = 0;
  int observed_added = 0;  // observed runs (by uid) new here or newer than the copy here
};

// Checks an input before anything is written, without SQLite (one open, one
// read of the 100-byte header, one close): that it can be opened and read, is
// an SQLite file, is feedtune's (application_id) and of a schema this
// feedtune reads. Throws StoreError with the path, the cause and the fix, one
// message per cause: too many open files, permission denied, no such file, a
// folder, empty, not SQLite, not feedtune's, a newer schema. A file with a
// -wal beside it (a sweep writing it) is checked by OpenMergeInput instead:
// its header may not be written yet.
void CheckMergeInput(const std::string& path);

// Opens an input: immutable (Store::OpenImmutable) when no -wal file lies
// beside it, which is how a finished sweep leaves its file; else read-only
// through SQLite's locks, so that a sweep still writing it is read
// consistently up to its last commit (its -wal and -shm exist already, so
// nothing is created beside it either). Throws StoreError as CheckMergeInput.
Store OpenMergeInput(const std::string& path);

// Copies into `out` every run of `source` it lacks, matched by run uid, with
// its machine (matched by hash: identity and label are kept), trials,
// repeats and verdict; ids are renumbered. Merging the same source again adds
// nothing; a run copied while it was still running is replaced once it has
// finished. Observed runs go too (by uid; a later write of the same job
// replaces an earlier one). One transaction: on any error nothing of
// `source` is merged; a source whose pages are damaged says so by name.
MergeStats MergeInto(Store& out, const Store& source);

// MergeInto for many inputs, as `feedtune merge` runs them: their rows go
// into one transaction per `inputs_per_commit` inputs, each input in a
// savepoint of its own, so an input that fails leaves the others of its batch
// in, and `out` is written (and synced) once per batch rather than once per
// input. Commit() commits what was added; destroyed before it, the merger
// rolls back what it added since the last commit. `out` must outlive it.
class Merger {
 public:
  explicit Merger(Store& out, int inputs_per_commit = 256);
  Merger(const Merger&) = delete;
  Merger& operator=(const Merger&) = delete;
  ~Merger();

  MergeStats Add(const Store& source);
  void Commit();

 private:
  Store& out_;
  const int inputs_per_commit_;
  int pending_ = 0;
  bool open_ = false;  // a transaction is open
};

}  // namespace feedtune::results

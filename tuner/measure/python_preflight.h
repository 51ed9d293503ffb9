// The preflight of a Python command workload: one run of the command, before
// any trial, that reports the interpreter (Python and torch versions, the
// default start method) and, when the sweep will start workers by forkserver
// or spawn, whether the Dataset and the functions sent with it pickle.
//
// Why before any trial: under forkserver and spawn (the default from Python
// 3.14 on Linux) every worker gets the Dataset by pickling, and a Dataset that
// holds a lambda or an open file fails in every trial with workers. The sweep
// refuses it up front, naming the attribute and the fix, instead of recording
// a curve of failures.
//
// Protocol (the probe and feedtune.serve speak it; docs/command-protocol.md):
// workload.argv is started once with the start knobs substituted, stdin from
// /dev/null, and FEEDTUNE_PROTOCOL=preflight plus FEEDTUNE_PICKLE_CHECK=
// always | unless-fork | (empty: no check) in the environment. The command sets
// itself up (imports, the dataset) and prints, last on stdout, one line
//   {"preflight": {"python_version": "3.11.2", "torch_version": "1.13.0",
//                  "default_start_method": "fork", "pickle_checked": true,
//                  "pickle_error": null}}
// and exits 0. A command that does not speak it (it prints a result, or
// nothing) is no error: the run then records no interpreter and the
// multiprocessing_context phase does not run.
//
// One thread; RunPythonPreflight blocks for at most workload.timeout_s and
// throws Interrupted when `stop` is raised.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "results/records.h"
#include "tuner/config/config.h"

namespace feedtune::tuner {

struct PythonPreflight {
  bool answered = false;       // the command printed a preflight line
  results::PythonFacts facts;  // when answered
  bool pickle_checked = false;
  // Non-empty: the Dataset (or its collate_fn / worker_init_fn) does not
  // pickle; says which attribute and the fix. The sweep must not start.
  std::string pickle_error;
  std::string note;            // why nothing was answered, for the progress output
};

// Whether a command workload runs Python: argv[0] is a python interpreter or
// some argument is a .py file. Only those get a preflight.
bool IsPythonCommand(const SweepConfig& config);

// What FEEDTUNE_PICKLE_CHECK asks for this config: "always" when a method the
// sweep will use is forkserver or spawn by name (loader.multiprocessing_context
// or sweep.start_methods), "unless-fork" when the interpreter's default decides
// (loader.multiprocessing_context default, or sweep.start_methods auto), else
// "" (fork only: nothing is pickled).
std::string PickleCheckFor(const SweepConfig& config);

// Runs the preflight. Throws Interrupted.
PythonPreflight RunPythonPreflight(const SweepConfig& config, const std::atomic<bool>* stop);

// A preflight line's object (`{"preflight": {...}}` or the inner object)
// read as RunPythonPreflight reads it; answered is false when `text` is not
// one. For a job that serves attached (`sweep --serve-fd` with
// --serve-preflight): it says its own preflight, since starting its argv
// would start a second job.
PythonPreflight PreflightFromText(const std::string& text);

// The method StartMethod::kDefault stands for, from the facts (kDefault when unknown).
loader::StartMethod DefaultStartMethod(const results::PythonFacts& facts);

}  // namespace feedtune::tuner

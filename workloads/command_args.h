// The command workload's argument template: placeholders such as
// {num_workers} in workload.argv are replaced per trial, and the same values
// are exported as FEEDTUNE_NUM_WORKERS, ... environment variables.
//
// A placeholder is '{' + lower-case letters and '_' + '}'. Any other brace text
// (JSON in an argument, say) is left as it is. Booleans are written true/false.
// Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loader/options.h"

namespace feedtune::workloads {

// What a run of the command is told.
struct CommandContext {
  loader::Knobs knobs;
  double measure_seconds = 2.0;  // sweep.measure_seconds
  int warmup_batches = 8;        // sweep.warmup_batches
  int64_t step_us = 20000;       // device.step_us
  int sync_every_steps = 1;      // device.sync_every_steps
  int rank = 0;                  // this process's rank with sweep.ranks > 1 (tuner/measure/command_ranks.h)
  int world_size = 1;            // sweep.ranks
};

// The per-trial knobs first (kKnobPlaceholders of them), then the sweep's settings.
inline constexpr std::array<std::string_view, 14> kPlaceholders = {
    "num_workers",     "pin_memory",      "non_blocking",   "prefetch_factor", "persistent_workers",
    "batch_size",      "multiprocessing_context",           "fetch_concurrency",
    "measure_seconds", "warmup_batches", "step_us",         "sync_every_steps",
    "rank",            "world_size"};
inline constexpr size_t kKnobPlaceholders = 8;

// (placeholder name, value), in kPlaceholders order.
std::vector<std::pair<std::string, std::string>> PlaceholderValues(const CommandContext& context);

// `arg` with every known placeholder replaced.
std::string ExpandPlaceholders(std::string_view arg, const CommandContext& context);

// The first placeholder-shaped name in `arg` that is not a known placeholder
// (without braces), or empty when there is none.
std::string UnknownPlaceholder(std::string_view arg);

// The first placeholder in `arg` that names a per-trial knob ({num_workers},
// {pin_memory}, {non_blocking}, {prefetch_factor}, {persistent_workers},
// {batch_size}, {multiprocessing_context}), without braces; empty when there is none. A serving command
// (workload.protocol serve) is started once per sweep, so such a placeholder
// could only hold the first trial's value; it is a config error there.
std::string FirstKnobPlaceholder(std::string_view arg);

// True for the placeholders that vary per trial (see FirstKnobPlaceholder).
bool IsKnobPlaceholder(std::string_view name);

// "FEEDTUNE_NUM_WORKERS=4", ... one per placeholder.
std::vector<std::string> PlaceholderEnvironment(const CommandContext& context);

}  // namespace feedtune::workloads

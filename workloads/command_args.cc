#include "workloads/command_args.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace feedtune::workloads {
namespace {

// Calls `on(name, begin, end)` for each '{name}' in `arg` (end is one past '}').
template <typename F>
void ForEachPlaceholder(std::string_view arg, F on) {
  size_t pos = 0;
  while ((pos = arg.find('{', pos)) != std::string_view::npos) {
    size_t end = pos + 1;
    while (end < arg.size() && (std::islower(static_cast<unsigned char>(arg[end])) || arg[end] == '_')) ++end;
    if (end < arg.size() && arg[end] == '}' && end > pos + 1) {
      on(arg.substr(pos + 1, end - pos - 1), pos, end + 1);
      pos = end + 1;
    } else {
      pos = pos + 1;
    }
  }
}

std::string Bool(bool v) { return v ? "true" : "false"; }

std::string Real(double v) {
  char buf[64];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, ptr) : std::to_string(v);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> PlaceholderValues(const CommandContext& c) {
  const loader::Knobs& k = c.knobs;
  return {{"num_workers", std::to_string(k.num_workers)},
          {"pin_memory", Bool(k.pin_memory)},
          {"non_blocking", Bool(k.non_blocking)},
          {"prefetch_factor", std::to_string(k.prefetch_factor)},
          {"persistent_workers", Bool(k.persistent_workers)},
          {"batch_size", std::to_string(k.batch_size)},
          // "default" = the interpreter's: the probe then passes no context.
          {"multiprocessing_context", loader::StartMethodName(k.multiprocessing_context)},
          {"fetch_concurrency", std::to_string(k.fetch_concurrency)},
          {"measure_seconds", Real(c.measure_seconds)},
          {"warmup_batches", std::to_string(c.warmup_batches)},
          {"step_us", std::to_string(c.step_us)},
          {"sync_every_steps", std::to_string(c.sync_every_steps)},
          {"rank", std::to_string(c.rank)},
          {"world_size", std::to_string(c.world_size)}};
}

std::string ExpandPlaceholders(std::string_view arg, const CommandContext& context) {
  const auto values = PlaceholderValues(context);
  std::string out;
  size_t copied = 0;
  ForEachPlaceholder(arg, [&](std::string_view name, size_t begin, size_t end) {
    const auto it = std::find_if(values.begin(), values.end(), [&](const auto& v) { return v.first == name; });
    if (it == values.end()) return;
    out.append(arg.substr(copied, begin - copied));
    out += it->second;
    copied = end;
  });
  out.append(arg.substr(copied));
  return out;
}

std::string UnknownPlaceholder(std::string_view arg) {
  std::string unknown;
  ForEachPlaceholder(arg, [&](std::string_view name, size_t, size_t) {
    if (unknown.empty() && std::find(kPlaceholders.begin(), kPlaceholders.end(), name) == kPlaceholders.end()) {
      unknown = name;
    }
  });
  return unknown;
}

bool IsKnobPlaceholder(std::string_view name) {
  const auto knobs_end = kPlaceholders.begin() + kKnobPlaceholders;
  return std::find(kPlaceholders.begin(), knobs_end, name) != knobs_end;
}

std::string FirstKnobPlaceholder(std::string_view arg) {
  std::string knob;
  ForEachPlaceholder(arg, [&](std::string_view name, size_t, size_t) {
    if (knob.empty() && IsKnobPlaceholder(name)) knob = name;
  });
  return knob;
}

std::vector<std::string> PlaceholderEnvironment(const CommandContext& context) {
  std::vector<std::string> env;
  for (const auto& [name, value] : PlaceholderValues(context)) {
    std::string var = "FEEDTUNE_";
    for (char ch : name) var += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    env.push_back(var + "=" + value);
  }
  return env;
}

}  // namespace feedtune::workloads

// What the command workload's three runners (command_measurer.cc: a command
// per window; command_server.cc: one serving command; command_ranks.cc: a
// node's rank processes) share about reading a child's output pipes: how
// much of each stream is kept, how often they are polled, and the reads.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace feedtune::tuner::child_output {

inline constexpr size_t kStdoutKeep = 64 * 1024;
inline constexpr size_t kStderrKeep = 16 * 1024;  // enough for a Python traceback
inline constexpr auto kPoll = std::chrono::milliseconds(100);
// After a child exits, how long its leftovers (its own children) may hold its
// output pipes open before the reader stops waiting for them.
inline constexpr auto kDrainGrace = std::chrono::seconds(2);

// strerror's text for an errno value.
std::string Errno(int error);

// "%g" of a number of seconds, as the messages print a timeout.
std::string FormatSeconds(double s);

// Appends `data`, keeping at least the last `keep` bytes (trimmed at 2 x keep).
void AppendTail(std::string& tail, const char* data, size_t n, size_t keep);

// Reads what a non-blocking `fd` has into `tail` (AppendTail); false at end
// of file or on an error, true when it would block.
bool Drain(int fd, std::string& tail, size_t keep);

}  // namespace feedtune::tuner::child_output

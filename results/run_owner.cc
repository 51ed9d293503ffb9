#include "results/run_owner.h"

#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <fstream>
#include <sstream>

namespace feedtune::results {
namespace {

std::string ProcFileLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

std::optional<int64_t> ProcessStartTicks(int64_t pid) {
  if (pid <= 0) return std::nullopt;
  // getline, not a stream iterator: a process that exits between the open and
  // the read fails the read with ESRCH, which getline turns into an empty line.
  const std::string stat = ProcFileLine("/proc/" + std::to_string(pid) + "/stat");
  // The command name (field 2) is in parentheses and may hold spaces and ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 1));
  std::string state;
  fields >> state;  // field 3
  if (state.empty() || state == "Z" || state == "X") return std::nullopt;
  std::string field;
  for (int i = 4; i <= 22 && fields >> field; ++i) {
    if (i == 22) {
      try {
        return std::stoll(field);
      } catch (const std::exception&) {
        return std::nullopt;
      }
    }
  }
  return std::nullopt;
}

RunOwner ThisProcess() {
  RunOwner owner;
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) == 0) owner.hostname = name;
  owner.boot_id = ProcFileLine("/proc/sys/kernel/random/boot_id");
  char link[256] = {};
  const ssize_t n = readlink("/proc/self/ns/pid", link, sizeof(link) - 1);
  if (n > 0) owner.pid_namespace.assign(link, static_cast<size_t>(n));
  // Without its start time a pid could be another process's later: not recorded.
  if (const std::optional<int64_t> start = ProcessStartTicks(getpid())) {
    owner.pid = getpid();
    owner.start_ticks = *start;
  }
  return owner;
}

std::string OwnerEnded(const RunOwner& owner, const RunOwner& here) {
  if (owner.pid <= 0 || owner.hostname.empty() || owner.hostname != here.hostname) return "";
  if (owner.boot_id.empty() || here.boot_id.empty()) return "";
  // No process outlives its boot, whatever namespace it ran in.
  if (owner.boot_id != here.boot_id) return " before the host restarted";
  if (owner.pid_namespace != here.pid_namespace) return "";
  // kill(0) first: under hidepid another user's live process has no /proc
  // entry this process can read, yet kill() says it exists (EPERM).
  if (::kill(static_cast<pid_t>(owner.pid), 0) != 0 && errno == ESRCH) return ", which has ended";
  const std::string stat = ProcFileLine("/proc/" + std::to_string(owner.pid) + "/stat");
  if (stat.empty()) return "";  // there, but hidden from this process: it may be running
  const std::optional<int64_t> start = ProcessStartTicks(owner.pid);
  if (!start) return ", which has ended";  // a zombie, or it ended since kill()
  if (*start != owner.start_ticks) return ", which has ended (its pid now names a later process)";
  return "";
}

}  // namespace feedtune::results

#include "tuner/measure/child_output.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <system_error>

namespace feedtune::tuner::child_output {

std::string Errno(int error) { return std::generic_category().message(error); }

std::string FormatSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

void AppendTail(std::string& tail, const char* data, size_t n, size_t keep) {
  tail.append(data, n);
  if (tail.size() > keep * 2) tail.erase(0, tail.size() - keep);
}

bool Drain(int fd, std::string& tail, size_t keep) {
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      AppendTail(tail, buf, static_cast<size_t>(n), keep);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

}  // namespace feedtune::tuner::child_output

#include "tuner/measure/line_socket.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstddef>

namespace feedtune::tuner::line_socket {

bool SendLine(int fd, const std::string& line) {
  const std::string data = line + "\n";
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool TakeLine(std::string& buffer, std::string* line) {
  const auto nl = buffer.find('\n');
  if (nl == std::string::npos) return false;
  *line = buffer.substr(0, nl);
  buffer.erase(0, nl + 1);
  return true;
}

bool ReadSome(int fd, std::string& buffer) {
  char chunk[65536];
  while (true) {
    const ssize_t n = recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buffer.append(chunk, static_cast<size_t>(n));
    return true;
  }
}

}  // namespace feedtune::tuner::line_socket

// Newline-framed text: the framing of the node trial's socketpairs (the
// rank_wire.h lines between the tuner and each rank, both ends), and how a
// serving command's stdout is split into lines (command_server.cc, TakeLine
// only). One place, so every reader splits alike: a line never holds its
// '\n', and a partial line waits in the caller's buffer until its end comes.
#pragma once

#include <string>

namespace feedtune::tuner::line_socket {

// Sends `line` and a '\n', all of it (blocking). MSG_NOSIGNAL: a dead peer is
// a false return, not SIGPIPE. False on any other error too.
bool SendLine(int fd, const std::string& line);

// Takes one line (without its '\n') out of `buffer` if it holds one.
bool TakeLine(std::string& buffer, std::string* line);

// Reads into `buffer` once (blocking until something comes); false at EOF or error.
bool ReadSome(int fd, std::string& buffer);

}  // namespace feedtune::tuner::line_socket

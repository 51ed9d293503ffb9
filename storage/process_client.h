// ProcessClient: the ObjectClient of whichever process and thread reads
// through it, made at that process's and thread's first read.
//
// A dataset is made in the consumer and copied into workers by fork; an
// ObjectClient holds connections that must never cross a fork and is one
// thread's (storage/object_client.h). So a dataset holds a ProcessClient
// (the source and keys, immutable) and each reader asks it for its own
// client: after a fork, or on another thread (worker_mode: thread), a new
// one is made; the parent's, copied into the child, is dropped without
// closing anything of the parent's.
//
// Safe from any thread or forked process. One client per thread is kept:
// a thread that reads two sources in turn reconnects at each switch.
//
// Every client it hands out adds to one FetchTally made with it (so before
// the fork): the requests, retries and first bytes of all its readers, in
// every process, which the consumer reads while they read (tally()).
#pragma once

#include <cstdint>
#include <memory>

#include "storage/credentials.h"
#include "storage/fetch_tally.h"
#include "storage/location.h"
#include "storage/object_client.h"

namespace feedtune::storage {

class ProcessClient {
 public:
  ProcessClient(Location source, AwsConfig config);

  // This process's and thread's client.
  ObjectClient& Get() const;

  const Location& source() const { return source_; }
  // How requests are made, for a dataset's description: "key id ... from
  // ..., region us-east-1, endpoint http://127.0.0.1:9000", or "plain
  // HTTP(S), unsigned" for an http(s) source.
  std::string DescribeAccess() const;
  const AwsConfig& config() const { return config_; }
  // What every client it handed out did, in any process.
  const FetchTally& tally() const { return *tally_; }

 private:
  const Location source_;
  const AwsConfig config_;
  // Which ProcessClient a thread's client belongs to: a number no other
  // ProcessClient of the process has, where an address could be reused by a
  // later one and hand it a client of another source.
  const uint64_t id_;
  const std::shared_ptr<FetchTally> tally_;
};

// "cache cold: nothing of SOURCE is cached on this box (every read is a
// GET); the store's own cache is outside the sweep's control": what
// cache: cold means for remote data, said before each measurement window.
std::string ColdCacheNote(const Location& source);

}  // namespace feedtune::storage

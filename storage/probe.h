// ProbeStore: what an object store looks like from this machine, for
// `feedtune inspect s3://...` and the run's records (docs/storage.md#the-probe):
// the time to the first byte (p50, p99), MB/s on one connection, and objects/s
// at rising requests in flight (1, 2, 4, ... through GetMany) until the rate
// stops rising. These are the figures a user would otherwise measure by hand
// to choose fetch_concurrency x num_workers.
//
// It reads a sample: the first `max_objects` objects of an s3:// prefix (each
// whole, or its first `object_bytes_cap` bytes), or ranges of `range_bytes`
// spread over one http(s) object. Bounded in time: about `budget_s` in all
// (plus the listing, and one request in flight when a level starts).
//
// Runs on the calling thread, through the caller's client (whose FetchStats it
// takes and starts again from zero). The result is a plain value: any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "storage/object_client.h"

namespace feedtune::storage {

struct ProbeOptions {
  double budget_s = 4;                        // the probe's time, about
  int max_objects = 64;                       // objects (or ranges) sampled
  int64_t object_bytes_cap = 1 << 20;         // a larger object is read as its first this-many bytes
  int64_t range_bytes = 100'000;              // one http(s) object: reads of this size
  int64_t large_read_bytes = 16 << 20;        // the read timed for MB/s per connection, at most
  std::vector<int> in_flight = {1, 2, 4, 8, 16, 32, 64};
  double min_gain = 0.10;                     // a level that beats the best so far by less ends the curve
};

struct ConcurrencyPoint {
  int in_flight = 0;
  int64_t reads = 0;
  double seconds = 0;
  double objects_per_s = 0;
  double mb_per_s = 0;  // all connections together, 10^6 bytes
};

struct ProbeResult {
  std::string source;            // "s3://bucket/prefix" or the URL
  std::string endpoint;          // ObjectClient::Describe(): where requests went, how signed
  int64_t sample_reads = 0;      // distinct objects (or ranges) read in turn
  int64_t bytes_per_read = 0;    // their mean size
  // At one request in flight, from the request sent to the first byte.
  std::optional<double> first_byte_p50_s;
  std::optional<double> first_byte_p99_s;
  int64_t first_byte_samples = 0;
  // One read on a kept connection: bytes / (time - first byte).
  std::optional<double> mb_per_s_per_connection;
  int64_t large_read_bytes = 0;
  std::vector<ConcurrencyPoint> curve;  // in the order measured
  int best_in_flight = 0;               // the level with the most objects/s
  int knee_in_flight = 0;               // the fewest in flight within min_gain of the most objects/s
  double min_gain = 0;                  // ProbeOptions::min_gain, the rule behind the two above
  std::string stopped;                  // why the curve ended where it did
  int64_t requests = 0;                 // HTTP requests, tries included
  int64_t retries = 0;
  double seconds = 0;                   // the probe, listing included
};

// Probes the client's source. Throws StorageError as the client does, and
// kNotFound when an s3:// prefix holds no object with bytes.
ProbeResult ProbeStore(ObjectClient& client, const ProbeOptions& options = {});

// One line per figure, for a terminal.
std::string ProbeText(const ProbeResult& result);
// The same as JSON; a figure not measured is null.
nlohmann::json ProbeJson(const ProbeResult& result);

}  // namespace feedtune::storage

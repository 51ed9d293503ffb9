// ObjectClient: reads objects from S3 (or an S3-compatible store) and byte
// ranges from an http(s) URL, through libcurl, with SigV4 signing, retries
// and the figures a sweep reports (docs/storage.md); writes objects to S3
// whole (Put, multipart uploads) for `feedtune convert`.
//
//   ObjectClient client(ParseLocation("s3://bucket/train/"), ResolveAwsConfig(ProcessEnvironment()));
//   std::vector<ObjectInfo> objects = client.List("train/");       // once, in the consumer
//   ...fork...
//   ObjectClient mine(location, config);                            // in each worker, after the fork
//   std::vector<GetRequest> batch = {{key, std::nullopt, span}, ...};
//   std::vector<int64_t> sizes = mine.GetMany(batch, fetch_concurrency);
//
// - One client per process. It holds connections (a keep-alive pool, TLS
//   sessions) that must never be shared across a fork: make it after the
//   fork, in the process that uses it. A client used in another process than
//   the one that made it throws std::logic_error; destroyed in another
//   process, it releases nothing, so the parent's connections stay intact.
// - Not thread-safe: one thread calls all of its methods. Several threads need
//   a client each.
// - All requests go through one CURLM multi handle and easy handles reused from
//   a pool, so connections are kept alive between calls and GetMany keeps up to
//   `concurrency` requests in flight on as many connections.
// - Retries: 503 (SlowDown), 500, 502, 504 and a connection reset or closed
//   mid-answer are tried again after an exponential backoff with full jitter
//   (RetryPolicy: a pause drawn from [0, min(cap, base x 2^(try-1))]), up to
//   max_tries tries in all, each counted in FetchStats by cause. Anything else
//   (403, 404, a timeout, a refused connection) fails at once.
// - Failures throw StorageError, whose kind a caller can act on and whose
//   message names the object, the cause and what to do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "storage/credentials.h"
#include "storage/fetch_tally.h"
#include "storage/location.h"

namespace feedtune::storage {

class StorageError : public std::runtime_error {
 public:
  enum class Kind {
    kForbidden,    // 403: a wrong secret, an unknown key id, no permission, a refused session token
    kNotFound,     // 404: no such object, bucket or file
    kWrongRegion,  // signed for one region, the bucket lives in another
    kSlowDown,     // 503 still, after every try
    kTimeout,      // no connection, no answer, or too slow an answer, within the configured time
    kRefused,      // nothing listens at the host and port (or the host does not resolve)
    kProtocol,     // an answer that is not what was asked for (Range ignored, a listing that cannot be read)
    kOther,        // anything else: another status, a buffer too small, TLS, a reset after every try
  };
  StorageError(Kind kind, const std::string& what, long http_status = 0)
      : std::runtime_error(what), kind_(kind), http_status_(http_status) {}
  Kind kind() const { return kind_; }
  // The HTTP status of the last answer; 0 when there was none (timeout, refused).
  long http_status() const { return http_status_; }

 private:
  Kind kind_;
  long http_status_;
};

// "forbidden", "not found", "wrong region", "slow down", "timeout", "refused", "protocol", "other".
std::string_view KindName(StorageError::Kind kind);

struct RetryPolicy {
  int max_tries = 6;     // tries in all, the first included; 1: no retry
  double base_s = 0.05;  // the backoff's ceiling before the first retry, doubling each retry
  double cap_s = 2.0;    // the backoff's ceiling never exceeds this
};

struct ClientOptions {
  double connect_timeout_s = 5;     // to open a connection (and the TLS handshake)
  double request_timeout_s = 120;   // one try, from start to the last byte; 0: no limit
  double low_speed_time_s = 30;     // a try that moves under low_speed_bytes_per_s for this long
  int64_t low_speed_bytes_per_s = 1;  //   times out (waiting for the first byte counts); 0: off
  RetryPolicy retry;
  int list_page_size = 1000;        // max-keys per ListObjectsV2 page (S3's own limit is 1000)
  // Where the client also adds its requests, retries and object reads as
  // they complete, beside its own FetchStats: a tally shared with the other
  // processes that read the source (storage/fetch_tally.h). None: FetchStats only.
  std::shared_ptr<FetchTally> tally;
};

// What the client did since it was made or last reset.
struct FetchStats {
  int64_t requests = 0;              // HTTP requests sent, tries and listings included
  int64_t retries_slowdown = 0;      // tries again after a 503 (SlowDown)
  int64_t retries_server_error = 0;  // after a 500, 502 or 504
  int64_t retries_connection = 0;    // after a connection reset or closed mid-answer
  int64_t objects = 0;               // object reads (Get, GetMany) that succeeded
  int64_t bytes = 0;                 // their bytes
  // Per successful object read: seconds from the request sent to the first
  // byte of the answer (connection setup excluded). Grows until reset.
  std::vector<double> first_byte_s;
  double seconds = 0;                // wall time spent in the client's calls
  int64_t bytes_sent = 0;            // bodies of writes that succeeded (Put, UploadPart)

  int64_t retries() const { return retries_slowdown + retries_server_error + retries_connection; }
};

struct ObjectInfo {
  std::string key;   // the full key in the bucket ("" for an http(s) source)
  int64_t size = 0;  // bytes
};

struct ByteRange {
  int64_t offset = 0;
  int64_t length = 0;  // bytes from offset; the object may end sooner (fewer bytes come back)
};

struct GetRequest {
  std::string key;                 // the object's key; "" for an http(s) source's URL
  std::optional<ByteRange> range;  // none: the whole object
  std::span<std::byte> out;        // the bytes land here; too small is an error (kOther)
};

struct UploadedPart {
  int number = 0;    // 1..10000
  std::string etag;  // as the store answered it, quotes included
};

class ObjectClient {
 public:
  // For an s3:// source, `config` gives the keys, region and endpoint
  // (path-style addressing at endpoint_url when set, else virtual-hosted
  // https://BUCKET.s3.REGION.amazonaws.com). An http(s) source is read
  // unsigned whatever `config` holds: AWS keys never go to another server.
  // Throws std::invalid_argument for options out of range.
  ObjectClient(Location source, AwsConfig config, ClientOptions options = {});
  ~ObjectClient();
  ObjectClient(ObjectClient&&) noexcept;
  ObjectClient& operator=(ObjectClient&&) noexcept;
  ObjectClient(const ObjectClient&) = delete;
  ObjectClient& operator=(const ObjectClient&) = delete;

  // The objects whose keys start with `prefix` (a raw S3 prefix: "train/"
  // lists the folder, "train" also "training/..."), every page, in key order,
  // at most max_keys of them (< 0: all). s3:// sources only (std::logic_error otherwise).
  std::vector<ObjectInfo> List(std::string_view prefix, int64_t max_keys = -1);
  // The object's size, by a HEAD request.
  ObjectInfo Head(std::string_view key);
  // The object, or the range of it, whole.
  std::vector<std::byte> Get(std::string_view key, std::optional<ByteRange> range = std::nullopt);
  // Reads every request into its buffer with up to `concurrency` requests in
  // flight, and returns the bytes written to each, in the requests' order.
  // The first request that fails (after its retries) stops the others and
  // throws its StorageError; the buffers' contents are then unspecified.
  std::vector<int64_t> GetMany(std::span<const GetRequest> requests, int concurrency);

  // Writes, s3:// only (std::logic_error for an http(s) source). Each is
  // whole or absent on the store: nothing is under a key until its PUT or
  // its multipart upload's completion returns.
  void Put(std::string_view key, std::span<const std::byte> body);
  // A multipart upload: its id; parts of at least 5 MiB but the last, each
  // sent with UploadPart (which returns its ETag), then Complete with every
  // part in order, or Abort. An upload neither completed nor aborted holds
  // its parts on the store (and is billed) until a lifecycle rule clears it.
  std::string CreateMultipartUpload(std::string_view key);
  std::string UploadPart(std::string_view key, std::string_view upload_id, int part_number,
                         std::span<const std::byte> body);
  void CompleteMultipartUpload(std::string_view key, std::string_view upload_id, std::span<const UploadedPart> parts);
  void AbortMultipartUpload(std::string_view key, std::string_view upload_id);
  void Delete(std::string_view key);

  const FetchStats& stats() const;
  // Returns the figures so far and starts them again from zero.
  FetchStats TakeStats();

  const Location& source() const;
  // How messages name an object: "s3://bucket/key", or the URL.
  std::string ObjectName(std::string_view key) const;
  // One line: the source, where requests go and how they are signed.
  std::string Describe() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace feedtune::storage

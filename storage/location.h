// Location: where a dataset lives when it is not a local path, parsed from
// what a user writes in `workload.path` or `feedtune inspect PATH`
// (docs/storage.md):
//
//   s3://BUCKET[/PREFIX]          an S3 bucket (or an S3-compatible store:
//                                 AWS_ENDPOINT_URL), and a key or key prefix
//   http://HOST[:PORT]/PATH       one object on a plain web server that answers
//   https://HOST[:PORT]/PATH      Range requests (a tar shard, a file)
//
// IsRemote() says whether a path is meant as one of these (any `scheme://`,
// and `s3:` written without its slashes) so that a typo is refused by
// ParseLocation() with a message instead of being looked up as a local file.
// Plain values: any thread, no state.
#pragma once

#include <string>
#include <string_view>

namespace feedtune::storage {

enum class Scheme { kS3, kHttp, kHttps };

struct Location {
  Scheme scheme = Scheme::kS3;
  // s3: the bucket and the key or prefix after it, as written ("data/train/"),
  // without the leading '/'; empty prefix: the whole bucket.
  std::string bucket;
  std::string prefix;
  // http(s): the URL as written (scheme and host lower-cased), query included.
  std::string url;

  bool is_s3() const { return scheme == Scheme::kS3; }
  // "s3://bucket/prefix" or the URL: how messages name the source.
  std::string ToString() const;
};

// True when `path` is written as a URL rather than a local path: it starts
// with a scheme and "://" (s3, http, https and the ones ParseLocation refuses
// with advice, such as gs://), or with "s3:" (a malformed S3 location).
bool IsRemote(std::string_view path);

// `text` with ASCII letters in lower case (schemes, hosts, header names).
std::string AsciiLower(std::string_view text);

// Parses an s3:// or http(s):// location. Throws std::invalid_argument naming
// the text, what is wrong with it and how to write it instead (a bucket
// name S3 would refuse, a missing host, an unsupported scheme, ...).
Location ParseLocation(std::string_view text);

// RFC 3986 percent-encoding: every byte but A-Z a-z 0-9 - _ . ~ is written
// %XX (upper-case hex); with keep_slash, '/' stays as it is (an S3 key in a
// path). This is what SigV4 signs, so a request must be written this way.
std::string PercentEncode(std::string_view text, bool keep_slash);

}  // namespace feedtune::storage

#include "storage/object_client.h"

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <sstream>

namespace feedtune::storage {

// RAII for libcurl's handles. Named, not anonymous: ObjectClient::Impl holds
// them, and a unity build includes this file, where GCC refuses a class with
// external linkage whose fields use an anonymous namespace's types.
namespace curl_handles {
struct EasyDeleter {
  void operator()(CURL* easy) const { curl_easy_cleanup(easy); }
};
struct MultiDeleter {
  void operator()(CURLM* multi) const { curl_multi_cleanup(multi); }
};
struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
}  // namespace curl_handles
using EasyPtr = std::unique_ptr<CURL, curl_handles::EasyDeleter>;
using MultiPtr = std::unique_ptr<CURLM, curl_handles::MultiDeleter>;
using SlistPtr = std::unique_ptr<curl_slist, curl_handles::SlistDeleter>;

namespace {

using Clock = std::chrono::steady_clock;

// curl_global_init is not safe beside other threads' libcurl calls; the first
// client of the process makes it, once. It is never undone: the process ends first.
void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
      throw StorageError(StorageError::Kind::kOther, "libcurl could not be initialised (curl_global_init)");
    }
  });
}

std::string Seconds(double s) {
  std::ostringstream out;
  out.precision(s < 10 ? 2 : 1);
  out << std::fixed << s << " s";
  return out.str();
}

// XML text with its five entities and numeric references decoded.
std::string XmlDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '&') {
      out.push_back(text[i]);
      continue;
    }
    const size_t semi = text.find(';', i);
    if (semi == std::string_view::npos) {
      out.push_back('&');
      continue;
    }
    const std::string_view entity = text.substr(i + 1, semi - i - 1);
    if (entity == "amp") out.push_back('&');
    else if (entity == "lt") out.push_back('<');
    else if (entity == "gt") out.push_back('>');
    else if (entity == "quot") out.push_back('"');
    else if (entity == "apos") out.push_back('\'');
    else if (!entity.empty() && entity[0] == '#') {
      const bool hex = entity.size() > 1 && (entity[1] == 'x' || entity[1] == 'X');
      const std::string digits(entity.substr(hex ? 2 : 1));
      char* end = nullptr;
      const unsigned long code = std::strtoul(digits.c_str(), &end, hex ? 16 : 10);
      if (digits.empty() || *end != '\0' || code > 0x10FFFF) {  // not a reference: keep it as written
        out.append(text.substr(i, semi - i + 1));
        i = semi;
        continue;
      }
      // UTF-8 of the code point.
      if (code < 0x80) {
        out.push_back(static_cast<char>(code));
      } else if (code < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (code >> 6)));
        out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
      } else if (code < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (code >> 12)));
        out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
      } else {
        out.push_back(static_cast<char>(0xF0 | (code >> 18)));
        out.push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
      }
    } else {
      out.append(text.substr(i, semi - i + 1));
    }
    i = semi;
  }
  return out;
}

// The text of the first <tag>...</tag> at or after `from` in `xml` (decoded),
// and where it ends; S3's answers are flat enough that no parser is needed.
std::optional<std::string> XmlTag(std::string_view xml, std::string_view tag, size_t* from = nullptr) {
  std::string open = "<";
  open.append(tag).append(">");
  std::string close = "</";
  close.append(tag).append(">");
  const size_t start = xml.find(open, from ? *from : 0);
  if (start == std::string_view::npos) return std::nullopt;
  const size_t end = xml.find(close, start + open.size());
  if (end == std::string_view::npos) return std::nullopt;
  if (from) *from = end + close.size();
  return XmlDecode(xml.substr(start + open.size(), end - start - open.size()));
}

// Text for an XML element's content (an ETag is quoted: &quot; is allowed, " too, but & and < are not).
std::string XmlEscape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else out.push_back(c);
  }
  return out;
}

// "host:port" of a URL, the scheme's port when none is written.
std::string HostPort(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return url;
  const std::string scheme = AsciiLower(url.substr(0, scheme_end));
  std::string authority = url.substr(scheme_end + 3);
  authority = authority.substr(0, std::min(authority.find('/'), authority.find('?')));
  const size_t bracket = authority.rfind(']');
  const size_t colon = authority.rfind(':');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) return authority;
  return authority + (scheme == "https" ? ":443" : ":80");
}

bool IsRetryableStatus(long status) { return status == 500 || status == 502 || status == 503 || status == 504; }

bool IsConnectionLoss(CURLcode code) {
  return code == CURLE_RECV_ERROR || code == CURLE_SEND_ERROR || code == CURLE_GOT_NOTHING ||
         code == CURLE_PARTIAL_FILE;
}

// One request: what to ask, where the answer goes, and its state across tries.
struct Transfer {
  // What.
  std::string url;
  std::string name;  // s3://bucket/key or the URL, for messages
  bool head = false;
  bool object_read = false;  // counts in FetchStats objects, bytes, first_byte_s
  // A write: the method ("PUT", "POST", "DELETE") and the body sent whole
  // with it (which must outlive the request; empty: none).
  const char* method = nullptr;
  std::span<const std::byte> send;
  const char* content_type = "application/octet-stream";
  std::optional<ByteRange> range;
  std::span<std::byte> fixed;              // the caller's buffer, or
  std::vector<std::byte>* grow = nullptr;  // a buffer that grows

  // This try.
  long status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string error_body;                      // the body of an answer >= 300
  int64_t written = 0;
  bool overflow = false;
  bool range_ignored = false;
  SlistPtr header_list;
  char error_text[CURL_ERROR_SIZE] = {};
  CURL* easy = nullptr;

  // Across tries.
  int tries = 0;
  Clock::time_point first_start{};
  Clock::time_point retry_at{};
  double last_try_s = 0;

  void StartTry() {
    status = 0;
    headers.clear();
    error_body.clear();
    written = 0;
    overflow = false;
    range_ignored = false;
    error_text[0] = '\0';
    if (grow) grow->clear();
  }
};

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  std::string_view line(data, n);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
  if (line.rfind("HTTP/", 0) == 0) {  // a status line: a new answer (after 100 Continue, a redirect)
    t->headers.clear();
    t->error_body.clear();
    const size_t space = line.find(' ');
    t->status = space == std::string_view::npos ? 0 : std::atol(std::string(line.substr(space + 1, 3)).c_str());
    return n;
  }
  const size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string value(line.substr(colon + 1));
    value.erase(0, value.find_first_not_of(" \t"));
    t->headers[AsciiLower(std::string(line.substr(0, colon)))] = value;
  }
  return n;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  if (t->status < 200 || t->status >= 300) {
    constexpr size_t kKeep = 64 * 1024;  // enough for any S3 error document
    t->error_body.append(data, std::min(n, kKeep - std::min(kKeep, t->error_body.size())));
    return n;
  }
  if (t->range && t->status == 200) {  // the whole object where a part was asked: stop at once
    t->range_ignored = true;
    return 0;
  }
  if (t->grow) {
    const auto* bytes = reinterpret_cast<const std::byte*>(data);
    t->grow->insert(t->grow->end(), bytes, bytes + n);
  } else {
    if (static_cast<size_t>(t->written) + n > t->fixed.size()) {
      t->overflow = true;
      return 0;
    }
    std::memcpy(t->fixed.data() + t->written, data, n);
  }
  t->written += static_cast<int64_t>(n);
  return n;
}

}  // namespace

std::string_view KindName(StorageError::Kind kind) {
  switch (kind) {
    case StorageError::Kind::kForbidden: return "forbidden";
    case StorageError::Kind::kNotFound: return "not found";
    case StorageError::Kind::kWrongRegion: return "wrong region";
    case StorageError::Kind::kSlowDown: return "slow down";
    case StorageError::Kind::kTimeout: return "timeout";
    case StorageError::Kind::kRefused: return "refused";
    case StorageError::Kind::kProtocol: return "protocol";
    case StorageError::Kind::kOther: return "other";
  }
  return "other";
}

class ObjectClient::Impl {
 public:
  Impl(Location source, AwsConfig config, ClientOptions options)
      : source_(std::move(source)), config_(std::move(config)), options_(options), pid_(getpid()),
        rng_(std::random_device{}()) {
    if (options_.retry.max_tries < 1 || options_.retry.base_s < 0 || options_.retry.cap_s < 0 ||
        options_.connect_timeout_s <= 0 || options_.request_timeout_s < 0 || options_.low_speed_time_s < 0 ||
        options_.low_speed_bytes_per_s < 0 || options_.list_page_size < 1 || options_.list_page_size > 1000) {
      throw std::invalid_argument(
          "storage client options out of range: retry.max_tries >= 1, backoff times >= 0, connect_timeout_s > 0, "
          "request_timeout_s and low-speed figures >= 0, list_page_size 1..1000");
    }
    InitCurlOnce();
    multi_.reset(curl_multi_init());
    if (!multi_) throw StorageError(StorageError::Kind::kOther, "libcurl could not make a multi handle");
    if (source_.is_s3()) {
      if (config_.endpoint_url) {
        base_url_ = config_.endpoint_url->value + "/" + source_.bucket;  // path-style
      } else if (source_.bucket.find('.') != std::string::npos) {
        // A dotted bucket name does not match S3's wildcard certificate as a host name.
        base_url_ = "https://s3." + config_.region.value + ".amazonaws.com/" + source_.bucket;
      } else {
        base_url_ = "https://" + source_.bucket + ".s3." + config_.region.value + ".amazonaws.com";
      }
      signed_ = config_.signed_requests();
      if (signed_) {
        sigv4_ = "aws:amz:" + config_.region.value + ":s3";
        userpwd_ = config_.access_key_id->value + ":" + config_.secret_access_key->value;
      }
    } else {
      base_url_ = source_.url;
    }
  }

  ~Impl() {
    if (getpid() != pid_) {
      // A copy in a forked child: cleaning up would close (and, with TLS, shut
      // down) the parent's connections. The child's copy of the memory is its own.
      (void)multi_.release();
      for (auto& easy : idle_) (void)easy.release();
      return;
    }
    // The pool's handles leave the multi handle before it goes (they are never in it while idle).
    idle_.clear();
    multi_.reset();
  }

  void CheckProcess() const {
    if (getpid() != pid_) {
      throw std::logic_error("storage::ObjectClient made in process " + std::to_string(pid_) + " used in process " +
                             std::to_string(getpid()) +
                             ": a client's connections must never cross a fork; make a client in each worker, "
                             "after the fork");
    }
  }

  std::string ObjectName(std::string_view key) const {
    if (source_.is_s3()) return "s3://" + source_.bucket + "/" + std::string(key);
    return ObjectUrl(key);
  }

  std::string ObjectUrl(std::string_view key) const {
    if (source_.is_s3()) {
      if (key.empty()) throw std::invalid_argument("an empty key names no object in " + source_.ToString());
      return base_url_ + "/" + PercentEncode(key, true);
    }
    if (key.empty()) return base_url_;
    if (base_url_.back() != '/') {
      throw std::invalid_argument("key '" + std::string(key) + "' given for " + base_url_ +
                                  ", which is one object; pass \"\" (or end the URL with '/' to read files under it)");
    }
    return base_url_ + PercentEncode(key, true);
  }

  std::string Describe() const {
    std::string text = source_.ToString();
    if (!source_.is_s3()) return text + " (plain HTTP(S), unsigned)";
    text += " at " + base_url_ + " (";
    text += config_.endpoint_url ? "endpoint from " + config_.endpoint_url->source + ", path-style" : "AWS";
    text += "; region " + config_.region.value + " from " + config_.region.source + "; " + config_.DescribeKeys() + ")";
    return text;
  }

  std::vector<ObjectInfo> List(std::string_view prefix, int64_t max_keys) {
    if (!source_.is_s3()) {
      throw std::logic_error("List needs an s3:// source; " + source_.url + " is one object (read it by ranges)");
    }
    std::vector<ObjectInfo> objects;
    std::string token;
    std::vector<std::string> seen_tokens;
    const std::string name = ObjectName(prefix) + " (listing)";
    while (max_keys < 0 || static_cast<int64_t>(objects.size()) < max_keys) {
      int64_t page = options_.list_page_size;
      if (max_keys >= 0) page = std::min<int64_t>(page, max_keys - static_cast<int64_t>(objects.size()));
      // Parameters sorted by name and RFC 3986-encoded: curl 7.88 signs the query as written.
      std::string query = "?";
      if (!token.empty()) query += "continuation-token=" + PercentEncode(token, false) + "&";
      query += "list-type=2&max-keys=" + std::to_string(page);
      if (!prefix.empty()) query += "&prefix=" + PercentEncode(prefix, false);
      std::vector<std::byte> body;
      Transfer transfer;
      transfer.url = base_url_ + query;
      transfer.name = name;
      transfer.grow = &body;
      std::vector<Transfer*> one = {&transfer};
      Run(one, 1);
      const std::string_view xml(reinterpret_cast<const char*>(body.data()), body.size());
      if (xml.find("<ListBucketResult") == std::string_view::npos) {
        throw StorageError(StorageError::Kind::kProtocol,
                           name + ": the answer is not a ListObjectsV2 result (is " + base_url_ +
                               " an S3 API endpoint?): " + std::string(xml.substr(0, 200)),
                           transfer.status);
      }
      size_t at = 0;
      while (auto contents = XmlTag(xml, "Contents", &at)) {
        auto key = XmlTag(*contents, "Key");
        auto size = XmlTag(*contents, "Size");
        if (!key || !size) {
          throw StorageError(StorageError::Kind::kProtocol, name + ": a <Contents> entry without <Key> or <Size>");
        }
        objects.push_back({*key, std::stoll(*size)});
      }
      if (XmlTag(xml, "IsTruncated").value_or("false") != "true") break;
      auto next = XmlTag(xml, "NextContinuationToken");
      if (!next || next->empty() || std::find(seen_tokens.begin(), seen_tokens.end(), *next) != seen_tokens.end()) {
        throw StorageError(StorageError::Kind::kProtocol,
                           name + ": the listing says it is truncated but gives no new continuation token");
      }
      seen_tokens.push_back(*next);
      token = *next;
    }
    std::sort(objects.begin(), objects.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
    if (max_keys >= 0 && static_cast<int64_t>(objects.size()) > max_keys) objects.resize(max_keys);
    return objects;
  }

  ObjectInfo Head(std::string_view key) {
    Transfer transfer;
    transfer.url = ObjectUrl(key);
    transfer.name = ObjectName(key);
    transfer.head = true;
    std::vector<Transfer*> one = {&transfer};
    Run(one, 1);
    const auto length = transfer.headers.find("content-length");
    if (length == transfer.headers.end()) {
      throw StorageError(StorageError::Kind::kProtocol, transfer.name + ": the HEAD answer has no Content-Length",
                         transfer.status);
    }
    return {std::string(key), std::stoll(length->second)};
  }

  std::vector<std::byte> Get(std::string_view key, std::optional<ByteRange> range) {
    CheckRange(key, range);
    std::vector<std::byte> body;
    if (range && range->length == 0) return body;
    Transfer transfer;
    transfer.url = ObjectUrl(key);
    transfer.name = ObjectName(key);
    transfer.range = range;
    transfer.grow = &body;
    transfer.object_read = true;
    std::vector<Transfer*> one = {&transfer};
    Run(one, 1);
    return body;
  }

  std::vector<int64_t> GetMany(std::span<const GetRequest> requests, int concurrency) {
    if (concurrency < 1) throw std::invalid_argument("GetMany: concurrency is at least 1");
    std::vector<int64_t> written(requests.size(), 0);
    std::vector<Transfer> transfers(requests.size());
    std::vector<Transfer*> to_run;
    for (size_t i = 0; i < requests.size(); ++i) {
      const GetRequest& request = requests[i];
      CheckRange(request.key, request.range);
      if (request.range && static_cast<size_t>(request.range->length) > request.out.size()) {
        throw std::invalid_argument("GetMany: request " + std::to_string(i) + " (" + ObjectName(request.key) +
                                    ") asks for " + std::to_string(request.range->length) + " bytes into a buffer of " +
                                    std::to_string(request.out.size()));
      }
      if (request.range && request.range->length == 0) continue;
      Transfer& transfer = transfers[i];
      transfer.url = ObjectUrl(request.key);
      transfer.name = ObjectName(request.key);
      transfer.range = request.range;
      transfer.fixed = request.out;
      transfer.object_read = true;
      to_run.push_back(&transfer);
    }
    Run(to_run, concurrency);
    for (size_t i = 0; i < requests.size(); ++i) written[i] = transfers[i].written;
    return written;
  }

  void Put(std::string_view key, std::span<const std::byte> body) { Write(key, "PUT", "", body); }

  std::string CreateMultipartUpload(std::string_view key) {
    std::vector<std::byte> answer;
    Write(key, "POST", "?uploads=", {}, &answer);
    const std::string_view xml(reinterpret_cast<const char*>(answer.data()), answer.size());
    auto id = XmlTag(xml, "UploadId");
    if (!id || id->empty()) {
      throw StorageError(StorageError::Kind::kProtocol, ObjectName(key) + ": the answer to starting a multipart "
                                                                          "upload has no <UploadId>: " +
                                                            std::string(xml.substr(0, 200)));
    }
    return *id;
  }

  std::string UploadPart(std::string_view key, std::string_view upload_id, int part_number,
                         std::span<const std::byte> body) {
    if (part_number < 1 || part_number > 10000) {
      throw std::invalid_argument("UploadPart: part numbers are 1..10000, got " + std::to_string(part_number));
    }
    // Parameters sorted by name: curl signs the query as written.
    const auto headers = Write(key, "PUT", "?partNumber=" + std::to_string(part_number) + "&uploadId=" +
                                               PercentEncode(upload_id, false),
                               body);
    const auto etag = headers.find("etag");
    if (etag == headers.end() || etag->second.empty()) {
      throw StorageError(StorageError::Kind::kProtocol,
                         ObjectName(key) + ": the answer to part " + std::to_string(part_number) + " has no ETag");
    }
    return etag->second;
  }

  void CompleteMultipartUpload(std::string_view key, std::string_view upload_id,
                               std::span<const UploadedPart> parts) {
    std::string xml = "<CompleteMultipartUpload>";
    for (const UploadedPart& part : parts) {
      xml += "<Part><PartNumber>" + std::to_string(part.number) + "</PartNumber><ETag>" + XmlEscape(part.etag) +
             "</ETag></Part>";
    }
    xml += "</CompleteMultipartUpload>";
    std::vector<std::byte> answer;
    Write(key, "POST", "?uploadId=" + PercentEncode(upload_id, false), std::as_bytes(std::span(xml)), &answer,
          "application/xml");
    // S3 answers 200 at once and may still fail the assembly: the error is then in the body.
    const std::string_view body(reinterpret_cast<const char*>(answer.data()), answer.size());
    if (body.find("<Error>") != std::string_view::npos) {
      throw StorageError(StorageError::Kind::kOther,
                         ObjectName(key) + ": completing the multipart upload failed: " +
                             XmlTag(body, "Code").value_or("?") + ": " + XmlTag(body, "Message").value_or(""),
                         200);
    }
  }

  void AbortMultipartUpload(std::string_view key, std::string_view upload_id) {
    Write(key, "DELETE", "?uploadId=" + PercentEncode(upload_id, false), {});
  }

  void Delete(std::string_view key) { Write(key, "DELETE", "", {}); }

  const Location& source() const { return source_; }
  FetchStats& stats() { return stats_; }

 private:
  void CheckRange(std::string_view key, const std::optional<ByteRange>& range) const {
    if (range && (range->offset < 0 || range->length < 0)) {
      throw std::invalid_argument("a byte range of " + ObjectName(key) + " has a negative offset or length");
    }
  }

  // One write request to `key` (+ `query`), retried as reads are (a part, a
  // PUT and a DELETE are idempotent; a second CreateMultipartUpload only
  // leaves an unused upload). Returns the answer's headers; its body goes to
  // *answer when given.
  std::map<std::string, std::string> Write(std::string_view key, const char* method, const std::string& query,
                                           std::span<const std::byte> body, std::vector<std::byte>* answer = nullptr,
                                           const char* content_type = "application/octet-stream") {
    if (!source_.is_s3()) {
      throw std::logic_error("writes need an s3:// destination; " + source_.url + " is read-only (plain HTTP)");
    }
    std::vector<std::byte> ignored;
    Transfer transfer;
    transfer.url = ObjectUrl(key) + query;
    transfer.name = ObjectName(key);
    transfer.method = method;
    transfer.send = body;
    transfer.content_type = content_type;
    transfer.grow = answer != nullptr ? answer : &ignored;
    std::vector<Transfer*> one = {&transfer};
    Run(one, 1);
    stats_.bytes_sent += static_cast<int64_t>(body.size());
    return transfer.headers;
  }

  CURL* AcquireEasy() {
    if (!idle_.empty()) {
      CURL* easy = idle_.back().release();
      idle_.pop_back();
      curl_easy_reset(easy);  // options only: the multi handle keeps the connections
      return easy;
    }
    CURL* easy = curl_easy_init();
    if (easy == nullptr) throw StorageError(StorageError::Kind::kOther, "libcurl could not make an easy handle");
    return easy;
  }

  // Takes the transfer's easy handle out of the multi handle and back to the pool.
  void ReleaseEasy(Transfer* t) {
    if (t->easy == nullptr) return;
    curl_multi_remove_handle(multi_.get(), t->easy);
    idle_.emplace_back(t->easy);
    t->easy = nullptr;
    t->header_list.reset();
  }

  void StartTry(Transfer* t) {
    t->StartTry();
    if (t->tries == 0) t->first_start = Clock::now();
    ++t->tries;
    CURL* easy = AcquireEasy();
    t->easy = easy;
    curl_easy_setopt(easy, CURLOPT_URL, t->url.c_str());
    curl_easy_setopt(easy, CURLOPT_PRIVATE, t);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, t->error_text);
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, t);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(easy, CURLOPT_USERAGENT, "feedtune-storage");
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, 256L * 1024);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout_s * 1000));
    if (options_.request_timeout_s > 0) {
      curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.request_timeout_s * 1000));
    }
    if (options_.low_speed_time_s > 0 && options_.low_speed_bytes_per_s > 0) {
      curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(options_.low_speed_bytes_per_s));
      curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME, static_cast<long>(std::ceil(options_.low_speed_time_s)));
    }
    if (t->head) curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
    if (t->method != nullptr) {
      // The body from memory with its length (no chunked encoding, which S3
      // refuses without its own framing); the method named over POST's.
      curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, t->method);
      if (std::strcmp(t->method, "DELETE") != 0) {
        static const char kEmpty[] = "";
        curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(t->send.size()));
        curl_easy_setopt(easy, CURLOPT_POSTFIELDS,
                         t->send.empty() ? kEmpty : reinterpret_cast<const char*>(t->send.data()));
        // A body over 1 MiB asks "Expect: 100-continue" first; send it at once
        // instead of waiting a round trip (or curl's 1 s) for the go-ahead.
        curl_easy_setopt(easy, CURLOPT_EXPECT_100_TIMEOUT_MS, 0L);
      }
    }
    if (!source_.is_s3()) {  // a web server may send the file from elsewhere; S3's redirects are errors here
      curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 1L);
      curl_easy_setopt(easy, CURLOPT_MAXREDIRS, 5L);
    }
    curl_slist* list = nullptr;
    auto add = [&list](const std::string& header) {
      curl_slist* grown = curl_slist_append(list, header.c_str());
      if (grown == nullptr) {
        curl_slist_free_all(list);
        throw std::bad_alloc();
      }
      list = grown;
    };
    if (t->range) {
      add("Range: bytes=" + std::to_string(t->range->offset) + "-" +
          std::to_string(t->range->offset + t->range->length - 1));
    }
    if (t->method != nullptr && std::strcmp(t->method, "DELETE") != 0) {
      // Not curl's form encoding. (No "Expect:" here to turn 100-continue
      // off: curl would sign the empty header it does not send.)
      add(std::string("Content-Type: ") + t->content_type);
    }
    if (signed_) {
      // curl 7.88 neither adds this header nor hashes the payload; S3 refuses a
      // signed request without it. curl signs it as the payload hash.
      add("x-amz-content-sha256: UNSIGNED-PAYLOAD");
      if (config_.session_token) add("x-amz-security-token: " + config_.session_token->value);
      curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, sigv4_.c_str());
      curl_easy_setopt(easy, CURLOPT_USERPWD, userpwd_.c_str());
    }
    t->header_list.reset(list);
    if (list != nullptr) curl_easy_setopt(easy, CURLOPT_HTTPHEADER, list);
    ++stats_.requests;
    if (options_.tally) options_.tally->AddRequest();
    const CURLMcode added = curl_multi_add_handle(multi_.get(), easy);
    if (added != CURLM_OK) {
      idle_.emplace_back(easy);
      t->easy = nullptr;
      throw StorageError(StorageError::Kind::kOther,
                         t->name + ": libcurl refused the request: " + curl_multi_strerror(added));
    }
  }

  enum class Outcome { kDone, kRetry, kFailed };

  // What to do with a finished try; fills *error when it failed for good.
  Outcome Judge(Transfer* t, CURLcode code, std::optional<StorageError>* error) {
    curl_off_t total_us = 0;
    curl_easy_getinfo(t->easy, CURLINFO_TOTAL_TIME_T, &total_us);
    t->last_try_s = static_cast<double>(total_us) / 1e6;
    const bool last_try = t->tries >= options_.retry.max_tries;
    if (code == CURLE_OK && t->status >= 200 && t->status < 300) {
      if (t->object_read) {
        curl_off_t sent_us = 0;
        curl_off_t first_us = 0;
        curl_easy_getinfo(t->easy, CURLINFO_PRETRANSFER_TIME_T, &sent_us);
        curl_easy_getinfo(t->easy, CURLINFO_STARTTRANSFER_TIME_T, &first_us);
        const double first_byte_s = static_cast<double>(std::max<curl_off_t>(0, first_us - sent_us)) / 1e6;
        stats_.first_byte_s.push_back(first_byte_s);
        ++stats_.objects;
        stats_.bytes += t->written;
        if (options_.tally) {
          options_.tally->AddObject(t->written, first_byte_s,
                                    static_cast<double>(std::max<curl_off_t>(0, total_us - first_us)) / 1e6);
        }
      }
      return Outcome::kDone;
    }
    if (code == CURLE_OK && IsRetryableStatus(t->status)) {
      if (!last_try) {
        (t->status == 503 ? stats_.retries_slowdown : stats_.retries_server_error) += 1;
        if (options_.tally) {
          options_.tally->AddRetry(t->status == 503 ? FetchTally::Retry::kSlowDown : FetchTally::Retry::kServerError);
        }
        return Outcome::kRetry;
      }
      error->emplace(RetriesExhausted(t));
      return Outcome::kFailed;
    }
    if (code == CURLE_OK) {
      error->emplace(HttpError(t));
      return Outcome::kFailed;
    }
    if (IsConnectionLoss(code) && !t->overflow && !t->range_ignored) {
      if (!last_try) {
        ++stats_.retries_connection;
        if (options_.tally) options_.tally->AddRetry(FetchTally::Retry::kConnection);
        return Outcome::kRetry;
      }
      error->emplace(StorageError::Kind::kOther,
                     t->name + ": the connection to " + HostPort(t->url) + " was lost " + std::to_string(t->tries) +
                         " times (" + Detail(t, code) + "); check the network or the store's health");
      return Outcome::kFailed;
    }
    error->emplace(CurlError(t, code));
    return Outcome::kFailed;
  }

  std::string Detail(const Transfer* t, CURLcode code) const {
    return t->error_text[0] != '\0' ? std::string(t->error_text) : std::string(curl_easy_strerror(code));
  }

  StorageError CurlError(const Transfer* t, CURLcode code) const {
    using Kind = StorageError::Kind;
    const std::string where = HostPort(t->url);
    if (t->overflow) {
      return StorageError(Kind::kOther, t->name + ": the object is larger than the " + std::to_string(t->fixed.size()) +
                                            "-byte buffer given for it (did it change since it was listed?); size "
                                            "buffers from List's or Head's sizes, or read a range",
                          t->status);
    }
    if (t->range_ignored) {
      return StorageError(Kind::kProtocol, t->name + ": the server ignored the Range header and sent the whole object "
                                                     "(200, not 206); a ranged source needs a server that answers "
                                                     "Range requests",
                          t->status);
    }
    switch (code) {
      case CURLE_OPERATION_TIMEDOUT: {
        curl_off_t connect_us = 0;
        curl_easy_getinfo(t->easy, CURLINFO_CONNECT_TIME_T, &connect_us);
        if (connect_us == 0) {
          return StorageError(Kind::kTimeout, t->name + ": no connection to " + where + " within " +
                                                  Seconds(options_.connect_timeout_s) +
                                                  " (connect_timeout_s); is the host reachable from here?");
        }
        return StorageError(Kind::kTimeout,
                            t->name + ": timed out after " + Seconds(t->last_try_s) + " (" + Detail(t, code) +
                                "; request_timeout_s " + Seconds(options_.request_timeout_s) +
                                ", or under " + std::to_string(options_.low_speed_bytes_per_s) + " B/s for " +
                                Seconds(options_.low_speed_time_s) +
                                "); raise the timeouts if the store is this slow, or check the network");
      }
      case CURLE_COULDNT_CONNECT: {
        std::string text = t->name + ": connection to " + where + " refused: nothing listens there (" +
                           Detail(t, code) + ")";
        if (source_.is_s3() && config_.endpoint_url) {
          text += "; is the endpoint right? " + config_.endpoint_url->value + " from " + config_.endpoint_url->source;
        } else {
          text += "; check the host and port";
        }
        return StorageError(Kind::kRefused, text);
      }
      case CURLE_COULDNT_RESOLVE_HOST:
        return StorageError(Kind::kRefused, t->name + ": the host of " + where + " does not resolve (" +
                                                Detail(t, code) + "); check the name" +
                                                (source_.is_s3() && config_.endpoint_url
                                                     ? " in " + config_.endpoint_url->source
                                                     : std::string(" and the bucket and region")));
      default:
        return StorageError(Kind::kOther, t->name + ": " + Detail(t, code) + " (libcurl error " +
                                              std::to_string(static_cast<int>(code)) + ", " + where + ")",
                            t->status);
    }
  }

  StorageError RetriesExhausted(const Transfer* t) const {
    const double spent = std::chrono::duration<double>(Clock::now() - t->first_start).count();
    const std::string code = XmlTag(t->error_body, "Code").value_or("");
    const std::string tries = std::to_string(t->tries) + " tries over " + Seconds(spent) + " (" +
                              std::to_string(t->tries - 1) + " retries with backoff)";
    if (t->status == 503) {
      return StorageError(StorageError::Kind::kSlowDown,
                          t->name + ": 503 " + (code.empty() ? "Service Unavailable" : code) + " still after " +
                              tries + ": the store asks for fewer requests per second; lower the requests in flight "
                                      "(fetch_concurrency x num_workers) or allow more tries",
                          t->status);
    }
    return StorageError(StorageError::Kind::kOther,
                        t->name + ": " + std::to_string(t->status) + (code.empty() ? "" : " " + code) +
                            " (a server error) still after " + tries + "; the store is failing, try again later",
                        t->status);
  }

  // The region S3 says the bucket lives in, from the answer (empty when it does not say).
  static std::string ExpectedRegion(const Transfer* t) {
    if (auto region = XmlTag(t->error_body, "Region")) return *region;
    if (auto it = t->headers.find("x-amz-bucket-region"); it != t->headers.end()) return it->second;
    return "";
  }

  StorageError HttpError(const Transfer* t) const {
    using Kind = StorageError::Kind;
    const long status = t->status;
    const std::string code = XmlTag(t->error_body, "Code").value_or("");
    std::string message = XmlTag(t->error_body, "Message").value_or("");
    if (message.size() > 300) message = message.substr(0, 300) + "...";
    std::string said = std::to_string(status);
    if (!code.empty()) said += " " + code;
    if (!message.empty()) said += ": " + message;
    const std::string expected = source_.is_s3() ? ExpectedRegion(t) : "";

    if (source_.is_s3() &&
        (code == "AuthorizationHeaderMalformed" || code == "PermanentRedirect" || code == "IllegalLocationConstraintException" ||
         ((status == 301 || status == 400) && !expected.empty() && expected != config_.region.value))) {
      std::string text = t->name + ": wrong region: requests are signed for " + config_.region.value + " (" +
                         config_.region.source + ")";
      text += expected.empty() ? " but S3 expects another (" + said + ")"
                               : " but the bucket is in " + expected + " (" + said + ")";
      text += "; set AWS_REGION=" + (expected.empty() ? std::string("<the bucket's region>") : expected);
      return StorageError(Kind::kWrongRegion, text, status);
    }
    if (status == 401 || status == 403) {
      return StorageError(Kind::kForbidden, t->name + ": " + said + "; " + ForbiddenAdvice(code, t->head, t->method != nullptr), status);
    }
    if (status == 404) {
      std::string text = t->name + ": ";
      if (!source_.is_s3()) {
        text += "no such file on the server (404); check the URL";
      } else if (code == "NoSuchBucket") {
        text += "no such bucket '" + source_.bucket + "' at " + HostPort(t->url) + " (" + said +
                "); check the bucket name" + (config_.endpoint_url ? " and the endpoint (" +
                                                                         config_.endpoint_url->source + ")"
                                                                   : std::string(" and the region"));
      } else if (t->head) {
        text += "no such object (404; a HEAD answer has no body to say whether the bucket exists); check the key";
      } else {
        text += "no such object (" + said + "); check the key: was it removed or renamed since it was listed?";
      }
      return StorageError(Kind::kNotFound, text, status);
    }
    if (status == 416) {
      std::string size;
      if (auto it = t->headers.find("content-range"); it != t->headers.end()) size = " (" + it->second + ")";
      return StorageError(Kind::kOther,
                          t->name + ": the range starts past the end of the object" + size + "; read within its size",
                          status);
    }
    if (status >= 300 && status < 400) {
      std::string where;
      if (auto it = t->headers.find("location"); it != t->headers.end()) where = " to " + it->second;
      return StorageError(Kind::kOther, t->name + ": redirected" + where + " (" + said + "); use the final address",
                          status);
    }
    return StorageError(Kind::kOther, t->name + ": " + said + (t->head ? " (a HEAD answer has no body)" : ""), status);
  }

  std::string ForbiddenAdvice(const std::string& code, bool head, bool write) const {
    if (!source_.is_s3()) return "the server refuses the file; check that it is readable without credentials";
    if (!signed_) {
      return "the request was unsigned: " + config_.DescribeKeys() +
             "; the bucket is not public, so set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or a profile";
    }
    const std::string keys = config_.DescribeKeys();
    const std::string& secret_from = config_.secret_access_key->source;
    if (code == "SignatureDoesNotMatch") {
      return "signed with " + keys + ": the secret access key (from " + secret_from +
             ") does not belong to this key id; fix the secret there";
    }
    if (code == "InvalidAccessKeyId") {
      return "the store does not know " + keys + "; check the key id there" +
             (config_.endpoint_url ? ", and that the endpoint (" + config_.endpoint_url->value + ", from " +
                                         config_.endpoint_url->source + ") is the store the key belongs to"
                                   : std::string());
    }
    if (code == "InvalidToken" || code == "ExpiredToken" || code == "TokenRefreshRequired") {
      return "the session token was refused (" + keys +
             (config_.session_token ? "" : ", and no session token") +
             "); temporary keys need their own token, and expire: get fresh credentials";
    }
    if (code.empty() && head) {
      return "signed with " + keys + " (secret from " + secret_from +
             "): a wrong secret, an unknown key id or no permission (a HEAD answer has no error code to say which; "
             "a GET of the same object names it)";
    }
    if (code == "RequestTimeTooSkewed") {
      return "this machine's clock differs from the store's by more than 15 minutes; set the clock (NTP)";
    }
    if (write) {
      return "signed with " + keys + ", which may not write this: the key's IAM policy or the bucket policy must "
             "allow s3:PutObject (which covers multipart uploads), s3:AbortMultipartUpload and s3:DeleteObject";
    }
    return "signed with " + keys + ", which may not read this: the key's IAM policy or the bucket policy must allow "
           "s3:GetObject (and s3:ListBucket to list)";
  }

  // Runs the transfers with up to `concurrency` in flight, retrying as the
  // policy says; returns when all succeeded, throws the first failure.
  void Run(std::vector<Transfer*>& transfers, int concurrency) {
    const auto started = Clock::now();
    struct Timer {
      FetchStats& stats;
      Clock::time_point started;
      ~Timer() { stats.seconds += std::chrono::duration<double>(Clock::now() - started).count(); }
    } timer{stats_, started};
    if (transfers.empty()) return;
    concurrency = std::min<int>(concurrency, static_cast<int>(transfers.size()));
    if (concurrency > max_connections_) {
      max_connections_ = concurrency;
      curl_multi_setopt(multi_.get(), CURLMOPT_MAXCONNECTS, static_cast<long>(max_connections_));
    }
    std::deque<Transfer*> waiting(transfers.begin(), transfers.end());
    std::vector<Transfer*> backing_off;
    int in_flight = 0;
    size_t done = 0;
    // Whatever happens, no handle stays in the multi handle after Run.
    struct Cleanup {
      Impl* impl;
      std::vector<Transfer*>& all;
      ~Cleanup() {
        for (Transfer* t : all) impl->ReleaseEasy(t);
      }
    } cleanup{this, transfers};

    while (done < transfers.size()) {
      const auto now = Clock::now();
      while (in_flight < concurrency) {
        // A retry whose pause is over goes first: it is the oldest request.
        auto ready = std::find_if(backing_off.begin(), backing_off.end(),
                                  [now](const Transfer* t) { return t->retry_at <= now; });
        Transfer* next = nullptr;
        if (ready != backing_off.end()) {
          next = *ready;
          backing_off.erase(ready);
        } else if (!waiting.empty()) {
          next = waiting.front();
          waiting.pop_front();
        } else {
          break;
        }
        StartTry(next);
        ++in_flight;
      }
      int running = 0;
      const CURLMcode performed = curl_multi_perform(multi_.get(), &running);
      if (performed != CURLM_OK) {
        throw StorageError(StorageError::Kind::kOther,
                           std::string("libcurl's multi handle failed: ") + curl_multi_strerror(performed));
      }
      int queued = 0;
      while (CURLMsg* message = curl_multi_info_read(multi_.get(), &queued)) {
        if (message->msg != CURLMSG_DONE) continue;
        Transfer* t = nullptr;
        curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&t));
        const CURLcode code = message->data.result;
        std::optional<StorageError> error;
        const Outcome outcome = Judge(t, code, &error);
        ReleaseEasy(t);
        --in_flight;
        if (outcome == Outcome::kFailed) throw *error;
        if (outcome == Outcome::kDone) {
          ++done;
        } else {
          t->retry_at = Clock::now() + Backoff(t->tries);
          backing_off.push_back(t);
        }
      }
      if (done == transfers.size()) break;
      // A free slot and a request that may start: start it now, no wait.
      if (in_flight < concurrency && !waiting.empty()) continue;
      // Else wait for the sockets (curl_multi_poll also wakes for curl's own
      // timers), or for the next retry's pause to end when a slot is free.
      int wait_ms = 1000;
      if (!backing_off.empty() && in_flight < concurrency) {
        auto earliest = std::min_element(backing_off.begin(), backing_off.end(),
                                         [](const Transfer* a, const Transfer* b) { return a->retry_at < b->retry_at; });
        const auto until = std::chrono::duration_cast<std::chrono::milliseconds>((*earliest)->retry_at - Clock::now());
        wait_ms = static_cast<int>(std::clamp<int64_t>(until.count() + 1, 0, 1000));
      }
      if (in_flight > 0 || wait_ms > 0) curl_multi_poll(multi_.get(), nullptr, 0, wait_ms, nullptr);
    }
  }

  // Full jitter: a pause drawn from [0, min(cap, base x 2^(tries - 1))].
  Clock::duration Backoff(int tries) {
    const double ceiling = std::min(options_.retry.cap_s, options_.retry.base_s * std::ldexp(1.0, tries - 1));
    std::uniform_real_distribution<double> draw(0.0, ceiling);
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(draw(rng_)));
  }

  // Constant after construction.
  const Location source_;
  const AwsConfig config_;
  const ClientOptions options_;
  const pid_t pid_;
  std::string base_url_;  // endpoint/bucket (path-style), https://bucket.s3.region.amazonaws.com, or the URL
  bool signed_ = false;
  std::string sigv4_;    // "aws:amz:REGION:s3"
  std::string userpwd_;  // "KEY:SECRET"

  // Changed by every call (one thread).
  MultiPtr multi_;
  std::vector<EasyPtr> idle_;  // easy handles between requests, reused
  int max_connections_ = 0;    // CURLMOPT_MAXCONNECTS: the most requests ever in flight
  FetchStats stats_;
  std::mt19937_64 rng_;        // the backoff's jitter
};

ObjectClient::ObjectClient(Location source, AwsConfig config, ClientOptions options)
    : impl_(std::make_unique<Impl>(std::move(source), std::move(config), options)) {}
ObjectClient::~ObjectClient() = default;
ObjectClient::ObjectClient(ObjectClient&&) noexcept = default;
ObjectClient& ObjectClient::operator=(ObjectClient&&) noexcept = default;

std::vector<ObjectInfo> ObjectClient::List(std::string_view prefix, int64_t max_keys) {
  impl_->CheckProcess();
  return impl_->List(prefix, max_keys);
}

ObjectInfo ObjectClient::Head(std::string_view key) {
  impl_->CheckProcess();
  return impl_->Head(key);
}

std::vector<std::byte> ObjectClient::Get(std::string_view key, std::optional<ByteRange> range) {
  impl_->CheckProcess();
  return impl_->Get(key, range);
}

std::vector<int64_t> ObjectClient::GetMany(std::span<const GetRequest> requests, int concurrency) {
  impl_->CheckProcess();
  return impl_->GetMany(requests, concurrency);
}

void ObjectClient::Put(std::string_view key, std::span<const std::byte> body) {
  impl_->CheckProcess();
  impl_->Put(key, body);
}

std::string ObjectClient::CreateMultipartUpload(std::string_view key) {
  impl_->CheckProcess();
  return impl_->CreateMultipartUpload(key);
}

std::string ObjectClient::UploadPart(std::string_view key, std::string_view upload_id, int part_number,
                                     std::span<const std::byte> body) {
  impl_->CheckProcess();
  return impl_->UploadPart(key, upload_id, part_number, body);
}

void ObjectClient::CompleteMultipartUpload(std::string_view key, std::string_view upload_id,
                                           std::span<const UploadedPart> parts) {
  impl_->CheckProcess();
  impl_->CompleteMultipartUpload(key, upload_id, parts);
}

void ObjectClient::AbortMultipartUpload(std::string_view key, std::string_view upload_id) {
  impl_->CheckProcess();
  impl_->AbortMultipartUpload(key, upload_id);
}

void ObjectClient::Delete(std::string_view key) {
  impl_->CheckProcess();
  impl_->Delete(key);
}

const FetchStats& ObjectClient::stats() const { return impl_->stats(); }

FetchStats ObjectClient::TakeStats() {
  FetchStats taken = std::move(impl_->stats());
  impl_->stats() = FetchStats{};
  return taken;
}

const Location& ObjectClient::source() const { return impl_->source(); }
std::string ObjectClient::ObjectName(std::string_view key) const { return impl_->ObjectName(key); }
std::string ObjectClient::Describe() const { return impl_->Describe(); }

}  // namespace feedtune::storage

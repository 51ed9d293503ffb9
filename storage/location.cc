#include "storage/location.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace feedtune::storage {

std::string AsciiLower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); });
  return out;
}

namespace {

bool StartsWithNoCase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && AsciiLower(text.substr(0, prefix.size())) == prefix;
}

// The length of a URL scheme at the start of `text` ("s3", "https"), 0 when there is none.
size_t SchemeLength(std::string_view text) {
  if (text.empty() || !std::isalpha(static_cast<unsigned char>(text[0]))) return 0;
  size_t i = 1;
  while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '+' ||
                             text[i] == '-' || text[i] == '.')) {
    ++i;
  }
  return i;
}

[[noreturn]] void Refuse(std::string_view text, const std::string& why) {
  throw std::invalid_argument("'" + std::string(text) + "' is not a remote location: " + why);
}

// S3's rules for bucket names (general purpose buckets), which S3-compatible
// stores share: 3-63 characters of a-z 0-9 . -, a letter or digit at each end.
void CheckBucket(std::string_view text, std::string_view bucket) {
  const std::string how = "; write s3://BUCKET/PREFIX, e.g. s3://my-data/train/";
  if (bucket.empty()) Refuse(text, "no bucket after s3://" + how);
  for (char c : bucket) {
    if (std::isupper(static_cast<unsigned char>(c))) {
      Refuse(text, "bucket names are lower-case in S3 ('" + std::string(bucket) + "' has '" + std::string(1, c) +
                       "'); write s3://" + AsciiLower(bucket) + "/... if that is the bucket");
    }
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '.' ||
          c == '-')) {
      Refuse(text, "the bucket name '" + std::string(bucket) + "' has '" + std::string(1, c) +
                       "'; S3 bucket names have only a-z, 0-9, '.' and '-'" + how);
    }
  }
  if (bucket.size() < 3 || bucket.size() > 63) {
    Refuse(text, "the bucket name '" + std::string(bucket) + "' has " + std::to_string(bucket.size()) +
                     " characters; S3 bucket names have 3 to 63" + how);
  }
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (!alnum(bucket.front()) || !alnum(bucket.back())) {
    Refuse(text, "the bucket name '" + std::string(bucket) + "' must begin and end with a letter or digit");
  }
}

Location ParseS3(std::string_view text) {
  std::string_view rest = text.substr(3);  // after "s3:"
  if (rest.substr(0, 2) != "//") {
    Refuse(text, "an S3 location starts with s3:// (two slashes); write s3://" +
                     std::string(rest.substr(rest.find_first_not_of('/') == std::string_view::npos
                                                 ? rest.size()
                                                 : rest.find_first_not_of('/'))));
  }
  rest.remove_prefix(2);
  const size_t slash = rest.find('/');
  Location location;
  location.scheme = Scheme::kS3;
  location.bucket = std::string(rest.substr(0, slash));
  if (slash != std::string_view::npos) location.prefix = std::string(rest.substr(slash + 1));
  CheckBucket(text, location.bucket);
  return location;
}

Location ParseHttp(std::string_view text, size_t scheme_length) {
  const std::string scheme = AsciiLower(text.substr(0, scheme_length));
  std::string_view rest = text.substr(scheme_length);
  if (rest.substr(0, 3) != "://") Refuse(text, "write " + scheme + "://HOST[:PORT]/PATH");
  rest.remove_prefix(3);
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) || std::iscntrl(static_cast<unsigned char>(c))) {
      Refuse(text, "a URL has no spaces or control characters; write a space in a file name as %20");
    }
  }
  if (text.find('#') != std::string_view::npos) {
    Refuse(text, "a '#' starts a fragment, which is never sent to the server; write '#' in a file name as %23");
  }
  const size_t path_start = std::min(rest.find('/'), rest.find('?'));
  std::string_view authority = rest.substr(0, path_start);
  std::string_view path = path_start == std::string_view::npos ? std::string_view() : rest.substr(path_start);
  if (authority.find('@') != std::string_view::npos) {
    Refuse(text, "credentials in a URL end up in logs and results files; serve the data without them, or put it "
                 "in S3 and use s3:// with AWS credentials");
  }
  std::string_view host = authority;
  std::string_view port;
  bool has_port = false;
  if (!authority.empty() && authority.front() == '[') {  // an IPv6 address: [::1]:8080
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) Refuse(text, "an IPv6 host is written [ADDRESS]:PORT; the ']' is missing");
    host = authority.substr(0, close + 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') Refuse(text, "after [ADDRESS] comes :PORT or the path");
      port = after.substr(1);
      has_port = true;
    }
  } else if (const size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    has_port = true;
  }
  if (host.empty() || host == "[]") {
    Refuse(text, "no host after " + scheme + "://; write " + scheme + "://HOST[:PORT]/PATH");
  }
  if (has_port) {
    const bool digits = !port.empty() && port.size() <= 5 && std::all_of(port.begin(), port.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c)) != 0;
    });
    if (!digits || std::stoi(std::string(port)) < 1 || std::stoi(std::string(port)) > 65535) {
      Refuse(text, "the port '" + std::string(port) + "' is not a number from 1 to 65535");
    }
  }
  if (path.empty() || path == "/") {
    Refuse(text, "no file after the host; an http(s) source is one object (a file the server answers Range "
                 "requests on), e.g. " + scheme + "://" + std::string(authority) + "/data/shard-0000.tar");
  }
  Location location;
  location.scheme = scheme == "https" ? Scheme::kHttps : Scheme::kHttp;
  location.url = scheme + "://" + AsciiLower(authority) + std::string(path);
  return location;
}

}  // namespace

std::string Location::ToString() const {
  if (scheme == Scheme::kS3) return "s3://" + bucket + (prefix.empty() ? "" : "/" + prefix);
  return url;
}

bool IsRemote(std::string_view path) {
  if (StartsWithNoCase(path, "s3:")) return true;
  const size_t length = SchemeLength(path);
  return length > 0 && path.substr(length, 3) == "://";
}

Location ParseLocation(std::string_view text) {
  if (StartsWithNoCase(text, "s3:")) {
    if (text.substr(0, 3) != "s3:") Refuse(text, "write the scheme in lower case: s3://" + std::string(text.substr(5)));
    return ParseS3(text);
  }
  const size_t length = SchemeLength(text);
  const std::string scheme = AsciiLower(text.substr(0, length));
  if (length > 0 && (scheme == "http" || scheme == "https")) return ParseHttp(text, length);
  if (length == 0 || text.substr(length, 3) != "://") {
    Refuse(text, "a remote location is s3://BUCKET/PREFIX or an http(s):// URL");
  }
  if (scheme == "gs" || scheme == "gcs") {
    Refuse(text, "gs:// is not read directly; Google Cloud Storage answers the S3 API: write s3://" +
                     std::string(text.substr(length + 3)) +
                     " with AWS_ENDPOINT_URL=https://storage.googleapis.com and an HMAC key in AWS_ACCESS_KEY_ID / "
                     "AWS_SECRET_ACCESS_KEY");
  }
  if (scheme == "file") Refuse(text, "a local file is written as a path, without file://");
  Refuse(text, scheme + ":// is not supported; a remote location is s3://BUCKET/PREFIX (S3 or an S3-compatible store "
                        "through AWS_ENDPOINT_URL) or an http(s):// URL");
}

std::string PercentEncode(std::string_view text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 15]);
    }
  }
  return out;
}

}  // namespace feedtune::storage

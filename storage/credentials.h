// Credentials, region and endpoint for S3, resolved as the AWS CLI resolves
// them (docs/storage.md#credentials), each value with where it came from, so
// that a refused request can say which key was used and where to fix it.
//
//   keys       AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN)
//              in the environment; else the profile's aws_access_key_id /
//              aws_secret_access_key / aws_session_token in the shared
//              credentials file (AWS_SHARED_CREDENTIALS_FILE, or
//              ~/.aws/credentials), then in the config file; else none:
//              requests go unsigned (a public bucket, a plain web server).
//   profile    AWS_PROFILE (or the older AWS_DEFAULT_PROFILE), else "default".
//   region     AWS_REGION, AWS_DEFAULT_REGION, the profile's `region` in the
//              config file (AWS_CONFIG_FILE, or ~/.aws/config; `[default]`,
//              `[profile NAME]`), else us-east-1.
//   endpoint   AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's
//              `endpoint_url` in the config file (none of these when
//              AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true), else AWS itself.
//
// Not resolved (the AWS CLI goes on to these): credential_process, SSO,
// assume-role profiles, web identity, container and instance metadata.
//
// The environment is a parameter, so tests never touch the process's own.
// Plain values and functions of their arguments: any thread.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace feedtune::storage {

// The environment as name -> value.
using Environment = std::map<std::string, std::string>;
// A copy of this process's environment (environ), for ResolveAwsConfig.
Environment ProcessEnvironment();

// A resolved value and where it came from: "AWS_ACCESS_KEY_ID in the
// environment", "~/.aws/credentials [ci]", "the default".
struct Sourced {
  std::string value;
  std::string source;
};

struct AwsConfig {
  std::string profile;                    // the profile the files were read for
  std::optional<Sourced> access_key_id;   // both keys, or neither
  std::optional<Sourced> secret_access_key;
  std::optional<Sourced> session_token;   // only with keys
  Sourced region;                         // always set (us-east-1 by default)
  std::optional<Sourced> endpoint_url;    // none: AWS's own endpoints

  // Requests are signed (SigV4) only when there are keys.
  bool signed_requests() const { return access_key_id.has_value(); }
  // "key id AKIA... from AWS_ACCESS_KEY_ID in the environment" or "no
  // credentials (unsigned requests): none in ..." for messages.
  std::string DescribeKeys() const;
};

// Resolves keys, region and endpoint from `env` and the files it points to
// (HOME for the ~/.aws defaults). Throws std::invalid_argument for what the
// AWS CLI also refuses, with how to fix it: only one of the two keys in the
// environment or in a profile, an AWS_PROFILE that no file has, an endpoint
// that is not an http(s) URL. A missing file is no error.
AwsConfig ResolveAwsConfig(const Environment& env);

}  // namespace feedtune::storage

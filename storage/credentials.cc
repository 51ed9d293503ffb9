#include "storage/credentials.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "storage/location.h"

extern char** environ;

namespace feedtune::storage {
namespace {

std::string Trim(std::string_view text) {
  size_t begin = 0;
  size_t end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return std::string(text.substr(begin, end - begin));
}

// The value of `name` in `env`; empty values count as unset, as in the AWS CLI.
std::optional<std::string> Get(const Environment& env, const std::string& name) {
  const auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

std::optional<Sourced> FromEnv(const Environment& env, const std::string& name) {
  if (auto value = Get(env, name)) return Sourced{*value, name + " in the environment"};
  return std::nullopt;
}

// An INI file as the AWS tools read it (Python's ConfigParser): [section]
// headers, `key = value` (or `key: value`), '#' and ';' comment lines, keys
// case-insensitive. Indented lines under a key with no value are a nested
// block (`s3 =\n  addressing_style = path`) and are skipped.
using Section = std::map<std::string, std::string>;

struct IniFile {
  std::string shown;  // "~/.aws/credentials" or the path as AWS_*_FILE gave it
  bool exists = false;
  std::map<std::string, Section> sections;
};

IniFile ReadIni(const std::string& path, std::string shown) {
  IniFile file;
  file.shown = std::move(shown);
  std::ifstream in(path);
  if (!in) return file;
  file.exists = true;
  Section* section = nullptr;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string trimmed = Trim(line);
    if (trimmed.empty() || trimmed[0] == '#' || trimmed[0] == ';') continue;
    if (trimmed.front() == '[' && trimmed.back() == ']') {
      // "[profile  ci ]" and "[profile ci]" are the same section.
      std::string name = Trim(std::string_view(trimmed).substr(1, trimmed.size() - 2));
      if (name.rfind("profile", 0) == 0 && name.size() > 7 && std::isspace(static_cast<unsigned char>(name[7]))) {
        name = "profile " + Trim(std::string_view(name).substr(8));
      }
      section = &file.sections[name];
      continue;
    }
    if (section == nullptr || std::isspace(static_cast<unsigned char>(line[0]))) continue;
    const size_t equals = trimmed.find_first_of("=:");
    if (equals == std::string::npos) continue;
    (*section)[AsciiLower(Trim(std::string_view(trimmed).substr(0, equals)))] =
        Trim(std::string_view(trimmed).substr(equals + 1));
  }
  return file;
}

// ~ at the start of a path, as the AWS CLI expands it in AWS_*_FILE.
std::string ExpandHome(const std::string& path, const std::optional<std::string>& home) {
  if (home && (path == "~" || path.rfind("~/", 0) == 0)) return *home + path.substr(1);
  return path;
}

// The shared file named by `variable`, else ~/.aws/<name>.
IniFile OpenShared(const Environment& env, const std::string& variable, const std::string& name) {
  const auto home = Get(env, "HOME");
  if (auto path = Get(env, variable)) return ReadIni(ExpandHome(*path, home), *path + " (" + variable + ")");
  if (!home) return IniFile{"~/.aws/" + name, false, {}};
  return ReadIni(*home + "/.aws/" + name, "~/.aws/" + name);
}

// The profile's section of the config file: [default] (or [profile default]) or [profile NAME].
const Section* ConfigSection(const IniFile& config, const std::string& profile, std::string* header) {
  std::vector<std::string> names = {"profile " + profile};
  if (profile == "default") names.insert(names.begin(), "default");
  for (const auto& name : names) {
    if (auto it = config.sections.find(name); it != config.sections.end()) {
      *header = name;
      return &it->second;
    }
  }
  return nullptr;
}

std::optional<Sourced> FromSection(const Section* section, const std::string& key, const std::string& source) {
  if (section == nullptr) return std::nullopt;
  const auto it = section->find(key);
  if (it == section->end() || it->second.empty()) return std::nullopt;
  return Sourced{it->second, source};
}

// Both keys from one place, or neither; half a pair is refused, as it is a
// mistake the AWS CLI would otherwise let pass to the next source unnoticed.
bool TakeKeys(std::optional<Sourced> id, std::optional<Sourced> secret, std::optional<Sourced> token,
              const std::string& where, const std::string& id_name, const std::string& secret_name, AwsConfig* config) {
  if (!id && !secret) return false;
  if (!id || !secret) {
    throw std::invalid_argument(where + " has " + (id ? id_name : secret_name) + " but not " +
                                (id ? secret_name : id_name) + "; set both (an access key is the pair) or neither");
  }
  config->access_key_id = std::move(id);
  config->secret_access_key = std::move(secret);
  config->session_token = std::move(token);
  return true;
}

std::string CheckEndpoint(const Sourced& endpoint) {
  std::string url = endpoint.value;
  const std::string lower = AsciiLower(url);
  if (lower.rfind("http://", 0) != 0 && lower.rfind("https://", 0) != 0) {
    throw std::invalid_argument("the endpoint '" + url + "' (" + endpoint.source +
                                ") is not an http(s) URL; write it as http://HOST:PORT or https://HOST");
  }
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

}  // namespace

Environment ProcessEnvironment() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const size_t equals = text.find('=');
    if (equals == std::string_view::npos) continue;
    env.emplace(std::string(text.substr(0, equals)), std::string(text.substr(equals + 1)));
  }
  return env;
}

std::string AwsConfig::DescribeKeys() const {
  if (!access_key_id) {
    return "no credentials (unsigned requests): none of AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY in the environment, "
           "nor keys for profile '" + profile + "' in the shared credentials or config file";
  }
  std::string text = "key id " + access_key_id->value + " from " + access_key_id->source;
  if (session_token) text += ", with a session token from " + session_token->source;
  return text;
}

AwsConfig ResolveAwsConfig(const Environment& env) {
  AwsConfig config;
  std::string profile_source = "the default";
  if (auto profile = Get(env, "AWS_PROFILE")) {
    config.profile = *profile;
    profile_source = "AWS_PROFILE";
  } else if (auto legacy = Get(env, "AWS_DEFAULT_PROFILE")) {
    config.profile = *legacy;
    profile_source = "AWS_DEFAULT_PROFILE";
  } else {
    config.profile = "default";
  }

  const IniFile credentials = OpenShared(env, "AWS_SHARED_CREDENTIALS_FILE", "credentials");
  const IniFile config_file = OpenShared(env, "AWS_CONFIG_FILE", "config");
  const Section* credentials_section = nullptr;
  if (auto it = credentials.sections.find(config.profile); it != credentials.sections.end()) {
    credentials_section = &it->second;
  }
  std::string config_header;
  const Section* config_section = ConfigSection(config_file, config.profile, &config_header);
  if (profile_source != "the default" && credentials_section == nullptr && config_section == nullptr) {
    throw std::invalid_argument(profile_source + "=" + config.profile + " names a profile that neither " +
                                credentials.shown + " (as [" + config.profile + "]) nor " + config_file.shown +
                                " (as [profile " + config.profile + "]) has; add it there or unset " + profile_source);
  }

  // Keys: the environment, the credentials file, the config file.
  const std::string credentials_where = credentials.shown + " [" + config.profile + "]";
  const std::string config_where = config_file.shown + " [" + config_header + "]";
  std::optional<Sourced> token = FromEnv(env, "AWS_SESSION_TOKEN");
  if (!token) token = FromEnv(env, "AWS_SECURITY_TOKEN");
  if (!TakeKeys(FromEnv(env, "AWS_ACCESS_KEY_ID"), FromEnv(env, "AWS_SECRET_ACCESS_KEY"), token, "the environment",
                "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", &config) &&
      !TakeKeys(FromSection(credentials_section, "aws_access_key_id", credentials_where),
                FromSection(credentials_section, "aws_secret_access_key", credentials_where),
                FromSection(credentials_section, "aws_session_token", credentials_where), credentials_where,
                "aws_access_key_id", "aws_secret_access_key", &config)) {
    TakeKeys(FromSection(config_section, "aws_access_key_id", config_where),
             FromSection(config_section, "aws_secret_access_key", config_where),
             FromSection(config_section, "aws_session_token", config_where), config_where, "aws_access_key_id",
             "aws_secret_access_key", &config);
  }

  // Region.
  if (auto region = FromEnv(env, "AWS_REGION")) {
    config.region = *region;
  } else if (auto default_region = FromEnv(env, "AWS_DEFAULT_REGION")) {
    config.region = *default_region;
  } else if (auto from_file = FromSection(config_section, "region", config_where)) {
    config.region = *from_file;
  } else {
    config.region = {"us-east-1", "the default (no AWS_REGION, AWS_DEFAULT_REGION or region in " + config_file.shown +
                                      ")"};
  }

  // Endpoint.
  const auto ignore = Get(env, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS");
  if (!(ignore && AsciiLower(*ignore) == "true")) {
    std::optional<Sourced> endpoint = FromEnv(env, "AWS_ENDPOINT_URL_S3");
    if (!endpoint) endpoint = FromEnv(env, "AWS_ENDPOINT_URL");
    if (!endpoint) endpoint = FromSection(config_section, "endpoint_url", config_where);
    if (endpoint) config.endpoint_url = Sourced{CheckEndpoint(*endpoint), endpoint->source};
  }
  return config;
}

}  // namespace feedtune::storage

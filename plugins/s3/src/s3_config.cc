#include "s3_config.h"

#include <cstdlib>
#include <fstream>
#include <map>

namespace reel::s3 {
namespace {

using Section = std::map<std::string, std::string>;

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// Reads section `name` of an AWS INI file; an absent file or section is an empty map (the AWS
// tools treat them the same way).
Section ReadIniSection(const std::string& path, const std::string& name) {
  Section out;
  std::ifstream in(path);
  std::string line, current;
  while (std::getline(in, line)) {
    line = Trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      current = Trim(line.substr(1, line.size() - 2));
      continue;
    }
    size_t eq = line.find('=');
    if (current != name || eq == std::string::npos) continue;
    out[Trim(line.substr(0, eq))] = Trim(line.substr(eq + 1));
  }
  return out;
}

std::string Get(const Section& s, const std::string& key) {
  auto it = s.find(key);
  return it == s.end() ? "" : it->second;
}

// First non-empty of the candidates.
std::string FirstOf(std::initializer_list<std::string> values) {
  for (const auto& v : values)
    if (!v.empty()) return v;
  return "";
}

Status CheckPositive(const Options& o, const char* name, int64_t min) {
  if (o.GetInt(name) < min)
    return InvalidArgumentError("s3 option '" + std::string(name) +
                                "': " + std::to_string(o.GetInt(name)) + " is below the minimum " +
                                std::to_string(min));
  return Status::Ok();
}

}  // namespace

OptionSchema S3OptionSchema() {
  return {
      StringOption("endpoint", "",
                   "S3 endpoint URL, e.g. http://127.0.0.1:9000 (default: "
                   "AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else AWS)"),
      StringOption("region", "",
                   "signing region (default: AWS_REGION, AWS_DEFAULT_REGION, "
                   "profile region, else us-east-1)"),
      StringOption("profile", "",
                   "profile in ~/.aws/credentials (default: AWS_PROFILE, else "
                   "'default')"),
      StringOption("access_key_id", "", "access key id (default: AWS_ACCESS_KEY_ID, profile)"),
      StringOption("secret_access_key", "", "secret key (default: AWS_SECRET_ACCESS_KEY, profile)"),
      StringOption("session_token", "", "session token (default: AWS_SESSION_TOKEN, profile)"),
      StringOption("addressing", "auto",
                   "path | virtual | auto (virtual on AWS, path for a "
                   "custom endpoint)"),
      IntOption("read_ahead", 8 << 20, "bytes per ranged GET when reading sequentially"),
      IntOption("parallel_ranges", 4, "ranged GETs in flight for large reads"),
      IntOption("part_size", 8 << 20, "multipart upload part size in bytes (>= 5 MiB)"),
      IntOption("max_retries", 5, "retries on timeouts, connection errors, 5xx and throttling"),
      IntOption("retry_base_ms", 100, "first retry delay ceiling (doubles, with full jitter)"),
      IntOption("retry_max_ms", 5000, "retry delay ceiling"),
      IntOption("connect_timeout_ms", 5000, "connection timeout"),
      IntOption("timeout_ms", 30000, "abandon a transfer that moves no data for this long"),
  };
}

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

Result<S3Config> ResolveS3Config(const Options& o, const EnvLookup& env) {
  auto e = [&](const char* name) { return env(name).value_or(""); };
  S3Config c;
  std::string home = e("HOME");
  std::string profile = FirstOf({o.GetString("profile"), e("AWS_PROFILE"), "default"});
  std::string cred_file =
      FirstOf({e("AWS_SHARED_CREDENTIALS_FILE"), home.empty() ? "" : home + "/.aws/credentials"});
  std::string config_file =
      FirstOf({e("AWS_CONFIG_FILE"), home.empty() ? "" : home + "/.aws/config"});
  Section creds = cred_file.empty() ? Section{} : ReadIniSection(cred_file, profile);
  // ~/.aws/config names non-default profiles "profile NAME".
  Section conf =
      config_file.empty()
          ? Section{}
          : ReadIniSection(config_file, profile == "default" ? profile : "profile " + profile);

  // Keys travel as a pair: an id from the options never combines with a secret from the profile.
  if (!o.GetString("access_key_id").empty() || !o.GetString("secret_access_key").empty()) {
    c.access_key_id = o.GetString("access_key_id");
    c.secret_access_key = o.GetString("secret_access_key");
    c.session_token = o.GetString("session_token");
    if (c.access_key_id.empty() || c.secret_access_key.empty())
      return InvalidArgumentError(
          "s3 options 'access_key_id' and 'secret_access_key' must be given together");
  } else if (!e("AWS_ACCESS_KEY_ID").empty()) {
    c.access_key_id = e("AWS_ACCESS_KEY_ID");
    c.secret_access_key = e("AWS_SECRET_ACCESS_KEY");
    c.session_token = FirstOf({o.GetString("session_token"), e("AWS_SESSION_TOKEN")});
    if (c.secret_access_key.empty())
      return InvalidArgumentError("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not");
  } else {
    c.access_key_id = Get(creds, "aws_access_key_id");
    c.secret_access_key = Get(creds, "aws_secret_access_key");
    c.session_token = FirstOf({o.GetString("session_token"), Get(creds, "aws_session_token")});
    if (!c.access_key_id.empty() && c.secret_access_key.empty())
      return InvalidArgumentError(cred_file + ": profile '" + profile +
                                  "' has aws_access_key_id but no aws_secret_access_key");
  }

  c.region = FirstOf({o.GetString("region"), e("AWS_REGION"), e("AWS_DEFAULT_REGION"),
                      Get(conf, "region"), "us-east-1"});
  std::string endpoint = FirstOf({o.GetString("endpoint"), e("AWS_ENDPOINT_URL_S3"),
                                  e("AWS_ENDPOINT_URL"), Get(conf, "endpoint_url")});
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  if (!endpoint.empty() && endpoint.find("://") == std::string::npos)
    return InvalidArgumentError("s3 endpoint '" + endpoint +
                                "' has no scheme (expected http://host:port or https://host)");
  c.endpoint = endpoint.empty() ? "https://s3." + c.region + ".amazonaws.com" : endpoint;

  std::string addressing = o.GetString("addressing");
  if (addressing == "path" || addressing == "virtual" || addressing == "auto") {
    c.virtual_addressing = addressing == "virtual" || (addressing == "auto" && endpoint.empty());
  } else {
    return InvalidArgumentError("s3 option 'addressing': '" + addressing +
                                "' is not one of path, virtual, auto");
  }

  REEL_RETURN_IF_ERROR(CheckPositive(o, "read_ahead", 4096));
  REEL_RETURN_IF_ERROR(CheckPositive(o, "parallel_ranges", 1));
  REEL_RETURN_IF_ERROR(CheckPositive(o, "part_size", 5 << 20));
  REEL_RETURN_IF_ERROR(CheckPositive(o, "max_retries", 0));
  REEL_RETURN_IF_ERROR(CheckPositive(o, "retry_base_ms", 0));
  REEL_RETURN_IF_ERROR(CheckPositive(o, "retry_max_ms", 0));
  REEL_RETURN_IF_ERROR(CheckPositive(o, "connect_timeout_ms", 1));
  REEL_RETURN_IF_ERROR(CheckPositive(o, "timeout_ms", 1000));
  c.read_ahead = o.GetInt("read_ahead");
  c.parallel_ranges = o.GetInt("parallel_ranges");
  c.part_size = o.GetInt("part_size");
  c.max_retries = o.GetInt("max_retries");
  c.retry_base_ms = o.GetInt("retry_base_ms");
  c.retry_max_ms = o.GetInt("retry_max_ms");
  c.connect_timeout_ms = o.GetInt("connect_timeout_ms");
  c.timeout_ms = o.GetInt("timeout_ms");
  return c;
}

}  // namespace reel::s3

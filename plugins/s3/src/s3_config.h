// S3 connection settings: endpoint, region, credentials and tuning, resolved the way the AWS
// tools resolve them. Precedence, highest first: component options (the config's `s3` section),
// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION /
// AWS_DEFAULT_REGION, AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, AWS_PROFILE), then the shared
// files ~/.aws/credentials and ~/.aws/config (or AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE)
// for the selected profile. No credentials at all means unsigned (anonymous) requests.
//
// Thread-safety: S3Config is a value; resolution reads the environment and files only.
#ifndef REEL_PLUGINS_S3_SRC_S3_CONFIG_H_
#define REEL_PLUGINS_S3_SRC_S3_CONFIG_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "reel/options.h"
#include "reel/status.h"

namespace reel::s3 {

struct S3Config {
  std::string endpoint;  // "scheme://host[:port]", no trailing '/'; AWS's regional one if unset
  std::string region = "us-east-1";
  std::string access_key_id;  // empty: unsigned requests
  std::string secret_access_key;
  std::string session_token;        // sent as x-amz-security-token when set
  bool virtual_addressing = false;  // bucket in the host name instead of the path

  int64_t read_ahead = 8 << 20;       // bytes fetched per ranged GET when scanning
  int64_t parallel_ranges = 4;        // ranged GETs in flight per large read / read-ahead
  int64_t part_size = 8 << 20;        // multipart upload part size (S3 minimum 5 MiB)
  int64_t max_retries = 5;            // retries after the first attempt
  int64_t retry_base_ms = 100;        // first backoff ceiling; doubles per retry, full jitter
  int64_t retry_max_ms = 5000;        // backoff ceiling
  int64_t connect_timeout_ms = 5000;  // TCP/TLS connect
  int64_t timeout_ms = 30000;         // a transfer that moves no byte for this long is abandoned
};

// The `s3` component's options; empty strings mean "take it from the environment".
OptionSchema S3OptionSchema();

// Looks up an environment variable; tests pass a fake.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup ProcessEnv();

// Resolves options + environment + shared files into a config. InvalidArgument names the option
// or variable at fault (e.g. an access key without a secret, a bad addressing value).
Result<S3Config> ResolveS3Config(const Options& options, const EnvLookup& env);

}  // namespace reel::s3

#endif  // REEL_PLUGINS_S3_SRC_S3_CONFIG_H_

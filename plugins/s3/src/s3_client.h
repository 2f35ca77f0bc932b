// S3Client: signed HTTP requests to one S3 endpoint, with retries and S3 error decoding.
//
// Requests go through libcurl; libcurl signs them itself (CURLOPT_AWS_SIGV4, "aws:amz:REGION:s3")
// and we supply x-amz-content-sha256 (SHA-256 of the payload, OpenSSL EVP), which curl both
// sends and uses as the payload hash in the signature. Query strings are built already in
// canonical form (sorted, RFC 3986-encoded) because curl 7.88 signs the query as given.
//
// Retries: timeouts, connection errors, truncated bodies, 5xx, 429 and S3 throttling codes
// (SlowDown, RequestTimeout, ...) are retried with exponential backoff and full jitter; other
// 4xx are not. Every error names the bucket and key, the HTTP status and the S3 error
// Code/Message from the XML body.
//
// Connections: a pool of curl easy handles (each keeps its connection alive between requests)
// sharing one DNS and TLS-session cache. Thread-safety: Execute() may be called from any number
// of threads at once; the client must outlive every reader and writer made from it (they hold
// a shared_ptr).
#ifndef REEL_PLUGINS_S3_SRC_S3_CLIENT_H_
#define REEL_PLUGINS_S3_SRC_S3_CLIENT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reel/status.h"
#include "s3_config.h"

namespace reel::s3 {

struct S3Request {
  std::string method = "GET";  // GET, HEAD, PUT, POST, DELETE
  std::string bucket;
  std::string key;        // may be empty (bucket-level requests)
  std::string query;      // canonical query, e.g. "list-type=2&prefix=a%2Fb"
  std::string_view body;  // payload (PUT/POST); must stay alive during Execute()
  // Ranged GET of [range_begin, range_begin + sink.size()) written straight into `sink`; an
  // empty sink means "no range, body into S3Response::body".
  uint64_t range_begin = 0;
  std::span<std::byte> sink;
  // For a reader's ranged GETs: the object as it was opened. The GET carries If-Match with the
  // ETag (S3 answers 412 if the object was replaced), and a 206 whose Content-Range gives
  // another total size is refused too (servers that ignore If-Match). Either is DataLoss:
  // "changed since it was opened", never bytes of two versions mixed in one file.
  std::string if_match;
  std::optional<uint64_t> object_size;
};

// Builds a request; body/sink/range_begin are set on the result where needed. (A function, not
// designated initializers: GCC warns about the members they leave out.)
inline S3Request MakeRequest(std::string method, std::string bucket, std::string key = "",
                             std::string query = "") {
  S3Request r;
  r.method = std::move(method);
  r.bucket = std::move(bucket);
  r.key = std::move(key);
  r.query = std::move(query);
  return r;
}

struct S3Response {
  long status = 0;
  std::string body;                     // the body when no sink was given
  std::string etag;                     // ETag header (quotes kept), for multipart parts
  uint64_t content_length = 0;          // Content-Length header (HEAD: the object's size)
  std::optional<uint64_t> range_total;  // the total size in a 206's Content-Range
};

class S3Client {
 public:
  static Result<std::shared_ptr<S3Client>> Create(S3Config config);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  const S3Config& config() const { return config_; }

  // Sends the request, retrying transient failures. A non-2xx answer becomes a Status: 404
  // NotFound, 401/403 PermissionDenied, 416 OutOfRange, other 4xx InvalidArgument or
  // FailedPrecondition, exhausted retries Unavailable.
  Result<S3Response> Execute(const S3Request& request);

  // "s3://bucket/key" for messages.
  static std::string Uri(std::string_view bucket, std::string_view key);

 private:
  struct Pool;
  explicit S3Client(S3Config config);

  S3Config config_;
  std::unique_ptr<Pool> pool_;
};

// RFC 3986 percent-encoding as SigV4 wants it; '/' kept when `keep_slash`.
std::string UriEncode(std::string_view s, bool keep_slash);
// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);
// Text of the first <tag>...</tag> in `xml`, entity-decoded; empty if absent.
std::string XmlValue(std::string_view xml, std::string_view tag);
// Every <tag>...</tag> block's inner text, raw.
std::vector<std::string_view> XmlBlocks(std::string_view xml, std::string_view tag);

// One page of a ListObjectsV2 answer.
struct ListPage {
  struct Object {
    std::string key;
    uint64_t size = 0;
  };
  std::vector<Object> objects;
  std::string next_token;  // non-empty when the listing goes on (IsTruncated)
};
// Parses a ListObjectsV2 answer. DataLoss naming `where` for an entry without a Key, a Size that
// is not a number, or a truncated page without a NextContinuationToken (which would otherwise end
// the listing early, silently).
Result<ListPage> ParseListPage(std::string_view xml, std::string_view where);

}  // namespace reel::s3

#endif  // REEL_PLUGINS_S3_SRC_S3_CLIENT_H_

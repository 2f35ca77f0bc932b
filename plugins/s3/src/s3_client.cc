#include "s3_client.h"

#include <curl/curl.h>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

namespace reel::s3 {
namespace {

constexpr char kEmptySha256[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// One attempt's result: the response, or a failure and whether trying again may help.
struct Attempt {
  Status status;
  bool retryable = false;
};

// State the curl callbacks write into during one attempt.
struct Transfer {
  CURL* curl = nullptr;
  std::span<std::byte> sink;
  size_t sink_pos = 0;
  bool overflow = false;
  S3Response* response = nullptr;
};

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t len = size * n;
  long code = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
  if (!t->sink.empty() && code >= 200 && code < 300) {
    if (t->sink_pos + len > t->sink.size()) {  // more than the range we asked for
      t->overflow = true;
      return 0;  // aborts the transfer with CURLE_WRITE_ERROR
    }
    std::memcpy(t->sink.data() + t->sink_pos, data, len);
    t->sink_pos += len;
    return len;
  }
  t->response->body.append(data, len);
  return len;
}

bool HeaderIs(std::string_view line, std::string_view name) {
  if (line.size() <= name.size() || line[name.size()] != ':') return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
  return true;
}

std::string HeaderValue(std::string_view line, size_t name_len) {
  std::string_view v = line.substr(name_len + 1);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' '))
    v.remove_suffix(1);
  return std::string(v);
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) {  // a new response (e.g. after 100 Continue): forget the old
    t->response->etag.clear();
    t->response->content_length = 0;
    t->response->range_total.reset();
  } else if (HeaderIs(line, "etag")) {
    t->response->etag = HeaderValue(line, 4);
  } else if (HeaderIs(line, "content-length")) {
    t->response->content_length = std::strtoull(HeaderValue(line, 14).c_str(), nullptr, 10);
  } else if (HeaderIs(line, "content-range")) {  // "bytes 0-99/1234"; the total may be "*"
    std::string v = HeaderValue(line, 13);
    size_t slash = v.rfind('/');
    if (slash != std::string::npos && slash + 1 < v.size() &&
        std::isdigit(static_cast<unsigned char>(v[slash + 1])))
      t->response->range_total = std::strtoull(v.c_str() + slash + 1, nullptr, 10);
  }
  return size * n;
}

bool RetryableCurlError(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

// S3 error codes that mean "slow down / try again" even when the status is a 4xx.
bool RetryableS3Code(long status, const std::string& code) {
  if (status >= 500 || status == 429) return true;
  return code == "SlowDown" || code == "Throttling" || code == "ThrottlingException" ||
         code == "RequestTimeout" || code == "RequestLimitExceeded" ||
         code == "TooManyRequestsException" || code == "InternalError";
}

Status StatusForHttp(long status, std::string message) {
  switch (status) {
    case 404:
      return NotFoundError(std::move(message));
    case 401:
    case 403:
      return PermissionDeniedError(std::move(message));
    case 416:
      return OutOfRangeError(std::move(message));
    case 409:
    case 412:
      return FailedPreconditionError(std::move(message));
    default:
      if (status >= 500 || status == 429) return UnavailableError(std::move(message));
      return InvalidArgumentError(std::move(message));
  }
}

void CurlGlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

// Idle easy handles plus the share object they all use for DNS and TLS sessions.
struct S3Client::Pool {
  CURLSH* share = nullptr;
  std::array<std::mutex, CURL_LOCK_DATA_LAST> locks;
  std::mutex mu;
  std::vector<CURL*> idle;

  static void Lock(CURL*, curl_lock_data d, curl_lock_access, void* p) {
    static_cast<Pool*>(p)->locks[d].lock();
  }
  static void Unlock(CURL*, curl_lock_data d, void* p) { static_cast<Pool*>(p)->locks[d].unlock(); }

  CURL* Acquire() {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!idle.empty()) {
        CURL* h = idle.back();
        idle.pop_back();
        return h;
      }
    }
    return curl_easy_init();
  }
  // curl_easy_reset keeps the handle's live connection, so the next request reuses it.
  void Release(CURL* h) {
    curl_easy_reset(h);
    std::lock_guard<std::mutex> lock(mu);
    idle.push_back(h);
  }
  ~Pool() {
    for (CURL* h : idle) curl_easy_cleanup(h);
    if (share) curl_share_cleanup(share);
  }
};

S3Client::S3Client(S3Config config) : config_(std::move(config)), pool_(new Pool) {}

S3Client::~S3Client() = default;

Result<std::shared_ptr<S3Client>> S3Client::Create(S3Config config) {
  CurlGlobalInit();
  curl_version_info_data* info = curl_version_info(CURLVERSION_NOW);
  if (info->version_num < 0x074b00)  // CURLOPT_AWS_SIGV4 arrived in 7.75.0
    return FailedPreconditionError(std::string("s3: libcurl ") + info->version +
                                   " is too old for AWS SigV4 signing (needs 7.75.0+)");
  std::shared_ptr<S3Client> client(new S3Client(std::move(config)));
  Pool* pool = client->pool_.get();
  pool->share = curl_share_init();
  if (pool->share == nullptr) return InternalError("s3: curl_share_init failed");
  curl_share_setopt(pool->share, CURLSHOPT_LOCKFUNC, &Pool::Lock);
  curl_share_setopt(pool->share, CURLSHOPT_UNLOCKFUNC, &Pool::Unlock);
  curl_share_setopt(pool->share, CURLSHOPT_USERDATA, pool);
  curl_share_setopt(pool->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
  curl_share_setopt(pool->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
  return client;
}

std::string S3Client::Uri(std::string_view bucket, std::string_view key) {
  return "s3://" + std::string(bucket) + "/" + std::string(key);
}

namespace {

std::string RequestUrl(const S3Config& c, const S3Request& r) {
  std::string path = "/" + UriEncode(r.key, /*keep_slash=*/true);
  std::string url;
  // "a.b.s3.amazonaws.com" does not match the "*.s3.amazonaws.com" certificate, so a dotted
  // bucket over https goes path-style (S3 serves both), as the AWS SDKs do.
  bool dotted_tls = r.bucket.find('.') != std::string::npos && c.endpoint.starts_with("https://");
  if (c.virtual_addressing && !dotted_tls) {
    size_t host = c.endpoint.find("://") + 3;
    url = c.endpoint.substr(0, host) + r.bucket + "." + c.endpoint.substr(host) + path;
  } else {
    url = c.endpoint + "/" + r.bucket + (r.key.empty() ? "" : path);
  }
  if (!r.query.empty()) url += "?" + r.query;
  return url;
}

std::string Describe(const S3Request& r) {
  return r.method + " " + S3Client::Uri(r.bucket, r.key) + " (bucket '" + r.bucket + "', key '" +
         r.key + "'" + (r.query.empty() ? "" : ", query '" + r.query + "'") + ")";
}

// Sets every option of one exchange on `h`. `url` and `sigv4` must outlive the transfer; the
// returned header list is the caller's to free after it.
curl_slist* Prepare(CURL* h, CURLSH* share, const S3Config& c, const S3Request& r,
                    const std::string& url, const std::string& sigv4, Transfer* t) {
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_SHARE, share);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);  // keys may hold "./" or "../"
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 512L << 10);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(c.connect_timeout_ms));
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, static_cast<long>((c.timeout_ms + 999) / 1000));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, t);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, t);

  std::vector<std::string> headers;
  headers.push_back("x-amz-content-sha256: " +
                    (r.body.empty() ? std::string(kEmptySha256) : Sha256Hex(r.body)));
  if (!c.session_token.empty()) headers.push_back("x-amz-security-token: " + c.session_token);
  if (!r.sink.empty())
    headers.push_back("Range: bytes=" + std::to_string(r.range_begin) + "-" +
                      std::to_string(r.range_begin + r.sink.size() - 1));
  if (!r.if_match.empty()) headers.push_back("If-Match: " + r.if_match);
  if (r.method == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (r.method == "PUT" || r.method == "POST") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r.method.c_str());
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, r.body.empty() ? "" : r.body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
    headers.push_back("Content-Type: application/octet-stream");
    // No "Expect:" override to suppress 100-continue: curl would sign the emptied header, and
    // the server would not see it. A short wait instead of curl's 1 s, for servers that ignore it.
    curl_easy_setopt(h, CURLOPT_EXPECT_100_TIMEOUT_MS, 300L);
  } else if (r.method != "GET") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r.method.c_str());
  }
  curl_slist* list = nullptr;
  for (const auto& hd : headers) list = curl_slist_append(list, hd.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
  if (!c.access_key_id.empty()) {
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4.c_str());
    curl_easy_setopt(h, CURLOPT_USERNAME, c.access_key_id.c_str());
    curl_easy_setopt(h, CURLOPT_PASSWORD, c.secret_access_key.c_str());
  }
  return list;
}

// Turns curl's result and the HTTP answer into a Status and whether a retry may help.
Attempt Classify(CURLcode rc, const char* err, const Transfer& t, const S3Request& r,
                 const S3Response& out) {
  if (t.overflow)
    return {DataLossError(Describe(r) + ": server sent more than the " +
                          std::to_string(r.sink.size()) + " requested bytes (Range ignored?)"),
            false};
  if (rc != CURLE_OK) {
    std::string what = rc == CURLE_PARTIAL_FILE ? "response truncated" : "transfer failed";
    return {UnavailableError(Describe(r) + ": " + what + ": " +
                             (err[0] ? err : curl_easy_strerror(rc)) + " (curl " +
                             std::to_string(rc) + ")"),
            RetryableCurlError(rc)};
  }
  if (!r.if_match.empty() && out.status == 412)
    return {DataLossError(Describe(r) +
                          ": the object changed since it was opened (its ETag is no "
                          "longer " +
                          r.if_match + ")"),
            false};
  if (r.object_size && out.status == 206 && out.range_total && *out.range_total != *r.object_size)
    return {DataLossError(Describe(r) + ": the object changed since it was opened (" +
                          std::to_string(*r.object_size) + " bytes then, " +
                          std::to_string(*out.range_total) + " now)"),
            false};
  if (out.status < 200 || out.status >= 300) {
    std::string code = XmlValue(out.body, "Code"), message = XmlValue(out.body, "Message");
    std::string text = Describe(r) + ": HTTP " + std::to_string(out.status);
    text += code.empty() ? " (no S3 error in the body)" : ", S3 error " + code + ": " + message;
    return {StatusForHttp(out.status, std::move(text)), RetryableS3Code(out.status, code)};
  }
  if (!r.sink.empty() && t.sink_pos != r.sink.size())
    return {
        UnavailableError(Describe(r) + ": response truncated: got " + std::to_string(t.sink_pos) +
                         " of " + std::to_string(r.sink.size()) + " bytes"),
        true};
  return {Status::Ok(), false};
}

// One HTTP exchange on handle `h`.
Attempt RunOnce(CURL* h, CURLSH* share, const S3Config& c, const S3Request& r, S3Response& out) {
  out = S3Response{};
  Transfer t{h, r.sink, 0, false, &out};
  const std::string url = RequestUrl(c, r);
  const std::string sigv4 = "aws:amz:" + c.region + ":s3";
  curl_slist* headers = Prepare(h, share, c, r, url, sigv4, &t);
  char err[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, err);
  CURLcode rc = curl_easy_perform(h);
  curl_slist_free_all(headers);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out.status);
  return Classify(rc, err, t, r, out);
}

}  // namespace

Result<S3Response> S3Client::Execute(const S3Request& request) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  S3Response response;
  for (int64_t attempt = 0;; ++attempt) {
    CURL* h = pool_->Acquire();
    if (h == nullptr) return InternalError("s3: curl_easy_init failed");
    Attempt a = RunOnce(h, pool_->share, config_, request, response);
    pool_->Release(h);
    if (a.status.ok()) return response;
    if (!a.retryable) return a.status;
    if (attempt >= config_.max_retries) {
      return UnavailableError("gave up after " + std::to_string(attempt + 1) +
                              " attempts: " + a.status.message());
    }
    // Full jitter: uniform in [0, min(max, base * 2^attempt)], so many clients spread out.
    int64_t ceiling = std::min<int64_t>(config_.retry_max_ms,
                                        config_.retry_base_ms << std::min<int64_t>(attempt, 20));
    std::uniform_int_distribution<int64_t> dist(0, std::max<int64_t>(ceiling, 0));
    std::this_thread::sleep_for(std::chrono::milliseconds(dist(rng)));
  }
}

std::string UriEncode(std::string_view s, bool keep_slash) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char ch : s) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~' ||
        (keep_slash && ch == '/')) {
      out += static_cast<char>(ch);
    } else {
      out += '%';
      out += kHex[ch >> 4];
      out += kHex[ch & 15];
    }
  }
  return out;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

namespace {
std::string XmlDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    size_t semi = s.find(';', i);
    if (semi == std::string_view::npos) {
      out += s[i];
      continue;
    }
    std::string_view ent = s.substr(i + 1, semi - i - 1);
    if (ent == "amp")
      out += '&';
    else if (ent == "lt")
      out += '<';
    else if (ent == "gt")
      out += '>';
    else if (ent == "quot")
      out += '"';
    else if (ent == "apos")
      out += '\'';
    else if (ent.size() > 1 && ent[0] == '#') {
      unsigned long cp = ent[1] == 'x'
                             ? std::strtoul(std::string(ent.substr(2)).c_str(), nullptr, 16)
                             : std::strtoul(std::string(ent.substr(1)).c_str(), nullptr, 10);
      if (cp < 0x80) {
        out += static_cast<char>(cp);
      } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      }
    } else {
      out.append(s.substr(i, semi - i + 1));
    }
    i = semi;
  }
  return out;
}
}  // namespace

std::vector<std::string_view> XmlBlocks(std::string_view xml, std::string_view tag) {
  std::vector<std::string_view> out;
  std::string open = "<" + std::string(tag) + ">", close = "</" + std::string(tag) + ">";
  size_t pos = 0;
  while ((pos = xml.find(open, pos)) != std::string_view::npos) {
    size_t start = pos + open.size();
    size_t end = xml.find(close, start);
    if (end == std::string_view::npos) break;
    out.push_back(xml.substr(start, end - start));
    pos = end + close.size();
  }
  return out;
}

std::string XmlValue(std::string_view xml, std::string_view tag) {
  auto blocks = XmlBlocks(xml, tag);
  return blocks.empty() ? "" : XmlDecode(blocks.front());
}

Result<ListPage> ParseListPage(std::string_view xml, std::string_view where) {
  ListPage page;
  size_t index = 0;
  for (std::string_view entry : XmlBlocks(xml, "Contents")) {
    const std::string key = XmlValue(entry, "Key"), size = XmlValue(entry, "Size");
    const std::string which =
        std::string(where) + ": ListObjectsV2 entry " + std::to_string(index++);
    if (XmlBlocks(entry, "Key").empty() || key.empty()) return DataLossError(which + " has no Key");
    uint64_t bytes = 0;
    auto [end, ec] = std::from_chars(size.data(), size.data() + size.size(), bytes);
    if (size.empty() || ec != std::errc() || end != size.data() + size.size())
      return DataLossError(which + " ('" + key + "'): Size '" + size + "' is not a byte count");
    page.objects.push_back({key, bytes});
  }
  if (XmlValue(xml, "IsTruncated") == "true") {
    page.next_token = XmlValue(xml, "NextContinuationToken");
    if (page.next_token.empty())
      return DataLossError(std::string(where) +
                           ": ListObjectsV2 page is truncated but has no NextContinuationToken");
  }
  return page;
}

}  // namespace reel::s3

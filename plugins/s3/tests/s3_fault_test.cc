// Faults a real server will not produce on demand, from a fake HTTP server on loopback:
// throttling, 5xx, refused credentials, truncated bodies, a failing multipart completion.
// Also checks the wire: virtual-hosted addressing and the signed headers.
#include <gtest/gtest.h>
#include <openssl/hmac.h>

#include <atomic>
#include <chrono>
#include <sstream>
#include <thread>

#include "s3_client.h"
#include "s3_storage.h"
#include "s3_test_env.h"

namespace reel::s3 {
namespace {

using testing::FakeHttpServer;
using testing::HttpRequestSeen;
using testing::HttpResponse;

std::string S3Error(const std::string& code, const std::string& message) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>" + code + "</Code><Message>" +
         message + "</Message></Error>";
}

S3Config FakeConfig(int port) {
  S3Config c;
  c.endpoint = "http://127.0.0.1:" + std::to_string(port);
  c.access_key_id = "AKIDEXAMPLE";
  c.secret_access_key = "secret";
  c.max_retries = 3;
  c.retry_base_ms = 1;
  c.retry_max_ms = 4;
  return c;
}

std::unique_ptr<Storage> Make(const S3Config& c) {
  auto s = MakeS3Storage(c);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

TEST(S3Faults, ThrottlingIsRetriedThenSucceeds) {
  std::atomic<int> calls{0};
  FakeHttpServer server([&](const HttpRequestSeen&) {
    if (++calls <= 2)
      return HttpResponse(503, S3Error("SlowDown", "Please reduce your request rate."));
    return HttpResponse(200, "hello");
  });
  auto client = S3Client::Create(FakeConfig(server.port()));
  ASSERT_TRUE(client.ok());
  auto r = (*client)->Execute(MakeRequest("GET", "b", "k"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, "hello");
  EXPECT_EQ(server.requests().size(), 3u);
}

TEST(S3Faults, ServerErrorsExhaustRetriesIntoUnavailable) {
  FakeHttpServer server([](const HttpRequestSeen&) {
    return HttpResponse(500, S3Error("InternalError", "We encountered an internal error."));
  });
  auto storage = Make(FakeConfig(server.port()));
  auto r = storage->Glob("s3://bkt/data/*");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  for (const char* part : {"bkt", "HTTP 500", "InternalError", "internal error", "4 attempts"})
    EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status();
  EXPECT_EQ(server.requests().size(), 4u);  // 1 + max_retries
}

TEST(S3Faults, ClientErrorsAreNotRetried) {
  FakeHttpServer server([](const HttpRequestSeen& req) {
    if (req.method == "HEAD") return HttpResponse(403, "");
    return HttpResponse(403, S3Error("AccessDenied", "Access Denied"));
  });
  auto storage = Make(FakeConfig(server.port()));
  auto r = storage->OpenRead("s3://bkt/secret/key");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  for (const char* part :
       {"bucket 'bkt'", "key 'secret/key'", "HTTP 403", "AccessDenied", "Access Denied"})
    EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status();
  EXPECT_EQ(server.requests().size(), 2u);  // the HEAD, then one GET for the error body
}

TEST(S3Faults, TruncatedBodyIsRetriedThenUnavailable) {
  // The HEAD answer must announce the size without a body.
  FakeHttpServer sized([](const HttpRequestSeen& req) {
    if (req.method == "HEAD")
      return std::string("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n");
    return std::string(
        "HTTP/1.1 206 Partial Content\r\nContent-Length: 1000\r\n"
        "Connection: close\r\n\r\n0123456789");
  });
  auto storage = Make(FakeConfig(sized.port()));
  auto file = storage->OpenRead("s3://bkt/short");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*(*file)->Size(), 1000u);
  std::string buf(1000, '\0');
  auto n = (*file)->Read(0, std::as_writable_bytes(std::span<char>(buf)));
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kUnavailable);
  for (const char* part : {"truncated", "bucket 'bkt'", "key 'short'"})
    EXPECT_NE(n.status().message().find(part), std::string::npos) << n.status();
  EXPECT_EQ(sized.requests().size(), 1u + 4u);  // HEAD + 4 GET attempts
}

// Every ranged GET asks for the version that was opened (If-Match: its ETag); S3's 412 for a
// replaced object is DataLoss, not retried, and names the object.
TEST(S3Faults, ReplacedObjectIsDataLossThroughIfMatch) {
  FakeHttpServer server([](const HttpRequestSeen& req) {
    if (req.method == "HEAD")
      return std::string(
          "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nETag: \"v1\"\r\nConnection: "
          "close\r\n\r\n");
    return HttpResponse(412, S3Error("PreconditionFailed",
                                     "At least one of the pre-conditions you specified did not "
                                     "hold"));
  });
  auto storage = Make(FakeConfig(server.port()));
  auto file = storage->OpenRead("s3://bkt/shard");
  ASSERT_TRUE(file.ok()) << file.status();
  std::string buf(100, '\0');
  auto n = (*file)->Read(0, std::as_writable_bytes(std::span<char>(buf)));
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kDataLoss) << n.status();
  for (const char* part : {"changed since it was opened", "\"v1\"", "key 'shard'"})
    EXPECT_NE(n.status().message().find(part), std::string::npos) << n.status();
  const std::vector<HttpRequestSeen> seen = server.requests();
  ASSERT_EQ(seen.size(), 2u);  // HEAD, one GET: not retried
  EXPECT_EQ(seen[1].headers.at("if-match"), "\"v1\"");
}

TEST(S3Faults, StalledServerTimesOutIntoUnavailable) {
  // Answers each request only after 1.5 s; the client gives up on a transfer silent for 1 s.
  FakeHttpServer server([](const HttpRequestSeen&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    return HttpResponse(200, "late");
  });
  S3Config c = FakeConfig(server.port());
  c.timeout_ms = 1000;
  c.max_retries = 1;
  auto client = S3Client::Create(c);
  ASSERT_TRUE(client.ok());
  auto r = (*client)->Execute(MakeRequest("GET", "bkt", "slow/key"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  for (const char* part : {"gave up after 2 attempts", "bucket 'bkt'", "key 'slow/key'", "curl 28"})
    EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status();
}

TEST(S3Faults, FailedMultipartCompletionAbortsTheUpload) {
  FakeHttpServer server([](const HttpRequestSeen& req) {
    if (req.method == "POST" && req.target.find("uploads=") != std::string::npos)
      return HttpResponse(200,
                          "<InitiateMultipartUploadResult><UploadId>up/1+x</UploadId>"
                          "</InitiateMultipartUploadResult>");
    if (req.method == "PUT") return HttpResponse(200, "", {"ETag: \"etag-part\""});
    if (req.method == "DELETE") return HttpResponse(204, "");
    // CompleteMultipartUpload: S3 may send 200 with an error inside.
    return HttpResponse(
        200, S3Error("InvalidPart", "One or more of the specified parts could not be found."));
  });
  S3Config c = FakeConfig(server.port());
  c.part_size = 5 << 20;
  auto storage = Make(c);
  auto file = storage->OpenWrite("s3://bkt/ckpt/model.bin");
  ASSERT_TRUE(file.ok());
  std::string data((5 << 20) + 10, 'x');
  ASSERT_TRUE((*file)->Append(std::as_bytes(std::span<const char>(data))).ok());
  Status closed = (*file)->Close();
  ASSERT_FALSE(closed.ok());
  EXPECT_NE(closed.message().find("InvalidPart"), std::string::npos) << closed;
  auto reqs = server.requests();
  ASSERT_FALSE(reqs.empty());
  EXPECT_EQ(reqs.back().method, "DELETE");
  EXPECT_EQ(reqs.back().target, "/bkt/ckpt/model.bin?uploadId=up%2F1%2Bx");
  // The parts went up with their part numbers, in order.
  EXPECT_EQ(reqs[1].target, "/bkt/ckpt/model.bin?partNumber=1&uploadId=up%2F1%2Bx");
  EXPECT_EQ(reqs[2].target, "/bkt/ckpt/model.bin?partNumber=2&uploadId=up%2F1%2Bx");
  EXPECT_EQ(reqs[2].body.size(), 10u);
}

// An independent AWS Signature V4 computation (the published algorithm, OpenSSL HMAC) over what
// the server received, to check the signature curl produced. S3 itself would refuse a request
// whose bytes differ from what was signed; s3rver does not check V4 signatures, so we do here.
std::string Hmac(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string Hex(const std::string& bytes) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) out += std::string{kHex[c >> 4], kHex[c & 15]};
  return out;
}

std::string ExpectedSignature(const HttpRequestSeen& r, const std::string& secret) {
  const std::string& auth = r.headers.at("authorization");
  auto field = [&](const std::string& name) {
    size_t b = auth.find(name + "=") + name.size() + 1;
    return auth.substr(b, auth.find_first_of(", ", b) - b);
  };
  std::string credential = field("Credential"), signed_headers = field("SignedHeaders");
  std::string scope = credential.substr(credential.find('/') + 1);
  size_t q = r.target.find('?');
  std::string path = r.target.substr(0, q);
  std::vector<std::string> params;
  if (q != std::string::npos) {
    std::stringstream ss(r.target.substr(q + 1));
    for (std::string p; std::getline(ss, p, '&');)
      params.push_back(p.find('=') == std::string::npos ? p + "=" : p);
  }
  std::sort(params.begin(), params.end());
  std::string query, headers;
  for (const auto& p : params) query += (query.empty() ? "" : "&") + p;
  std::stringstream names(signed_headers);
  for (std::string h; std::getline(names, h, ';');) headers += h + ":" + r.headers.at(h) + "\n";
  std::string canonical = r.method + "\n" + path + "\n" + query + "\n" + headers + "\n" +
                          signed_headers + "\n" + r.headers.at("x-amz-content-sha256");
  std::string to_sign = "AWS4-HMAC-SHA256\n" + r.headers.at("x-amz-date") + "\n" + scope + "\n" +
                        Sha256Hex(canonical);
  std::string key = "AWS4" + secret;
  std::stringstream parts(scope);
  for (std::string p; std::getline(parts, p, '/');) key = Hmac(key, p);
  return Hex(Hmac(key, to_sign));
}

std::string SignatureSent(const HttpRequestSeen& r) {
  const std::string& auth = r.headers.at("authorization");
  return auth.substr(auth.find("Signature=") + 10);
}

TEST(S3Faults, SignaturesVerifyIndependently) {
  FakeHttpServer server([](const HttpRequestSeen& req) {
    if (req.method == "GET")
      return HttpResponse(200,
                          "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>");
    return HttpResponse(200, "");
  });
  S3Config c = FakeConfig(server.port());
  c.session_token = "token/with+chars";
  auto storage = Make(c);
  ASSERT_TRUE(WriteAll(*storage, "s3://bkt/dir name/obj+1.bin", "payload bytes").ok());
  ASSERT_TRUE(storage->Glob("s3://bkt/dir name/o*").ok());
  // Large enough for curl to add "Expect: 100-continue".
  ASSERT_TRUE(WriteAll(*storage, "s3://bkt/big", std::string(3 << 20, 'b')).ok());
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[1].target, "/bkt?list-type=2&max-keys=1000&prefix=dir%20name%2Fo");
  for (const auto& r : reqs) {
    EXPECT_EQ(SignatureSent(r), ExpectedSignature(r, "secret")) << r.method << " " << r.target;
    EXPECT_NE(SignatureSent(r), ExpectedSignature(r, "other-secret"));
  }
}

TEST(S3Faults, RequestsCarrySignatureAndPayloadHash) {
  FakeHttpServer server([](const HttpRequestSeen&) { return HttpResponse(200, ""); });
  S3Config c = FakeConfig(server.port());
  c.session_token = "tok";
  auto storage = Make(c);
  ASSERT_TRUE(WriteAll(*storage, "s3://bkt/a b/c+d", "abc").ok());
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  const auto& r = reqs[0];
  EXPECT_EQ(r.method, "PUT");
  EXPECT_EQ(r.target, "/bkt/a%20b/c%2Bd");
  EXPECT_EQ(r.body, "abc");
  // SHA-256("abc") from FIPS 180-2, appendix B.1.
  EXPECT_EQ(r.headers.at("x-amz-content-sha256"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(r.headers.at("x-amz-security-token"), "tok");
  const std::string& auth = r.headers.at("authorization");
  EXPECT_EQ(auth.rfind("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/", 0), 0u) << auth;
  EXPECT_NE(auth.find("/us-east-1/s3/aws4_request"), std::string::npos) << auth;
  EXPECT_NE(auth.find("x-amz-content-sha256"), std::string::npos) << auth;
  EXPECT_NE(auth.find("x-amz-security-token"), std::string::npos) << auth;
}

TEST(S3Faults, VirtualHostedAddressingPutsBucketInHost) {
  FakeHttpServer server([](const HttpRequestSeen&) {
    return HttpResponse(200,
                        "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>");
  });
  S3Config c = FakeConfig(server.port());
  c.endpoint = "http://localhost:" + std::to_string(server.port());  // *.localhost is loopback
  c.virtual_addressing = true;
  auto storage = Make(c);
  auto r = storage->Glob("s3://my-bucket/dir/*.tfrecord");
  ASSERT_TRUE(r.ok()) << r.status();
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].headers.at("host"), "my-bucket.localhost:" + std::to_string(server.port()));
  EXPECT_EQ(reqs[0].target, "/?list-type=2&max-keys=1000&prefix=dir%2F");
}

TEST(S3Faults, MalformedUrisAreInvalidArgument) {
  auto storage = Make(FakeConfig(1));
  EXPECT_EQ(storage->OpenRead("s3://bucket-only").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(storage->OpenRead("s3:///key").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(storage->OpenWrite("gs://b/k").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(storage->Glob("s3://b*/k").status().code(), StatusCode::kInvalidArgument);
}

// A listing the client cannot trust is an error, not a shorter list: a truncated page without a
// continuation token (the rest of the listing would silently be missing), an entry without a key,
// a size that is not a number.
TEST(S3Faults, MalformedListingsAreDataLoss) {
  auto page = [](const std::string& inner) {
    return "<ListBucketResult><Name>bkt</Name>" + inner + "</ListBucketResult>";
  };
  const std::string entry = "<Contents><Key>d/a</Key><Size>12</Size></Contents>";
  struct Case {
    std::string body, message;
  } cases[] = {
      {page("<IsTruncated>true</IsTruncated>" + entry),
       "truncated but has no NextContinuationToken"},
      {page("<Contents><Size>3</Size></Contents>"), "entry 0 has no Key"},
      {page(entry + "<Contents><Key>d/b</Key><Size>12x</Size></Contents>"),
       "entry 1 ('d/b'): Size '12x' is not a byte count"},
      {page("<Contents><Key>d/c</Key></Contents>"), "Size '' is not a byte count"},
  };
  for (const Case& c : cases) {
    FakeHttpServer server([&](const HttpRequestSeen&) { return HttpResponse(200, c.body); });
    auto storage = Make(FakeConfig(server.port()));
    auto r = storage->Glob("s3://bkt/d/*");
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status();
    EXPECT_NE(r.status().message().find(c.message), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find("s3://bkt/d/"), std::string::npos) << r.status();
  }
  auto good = ParseListPage(page("<IsTruncated>false</IsTruncated>" + entry), "x");
  ASSERT_TRUE(good.ok()) << good.status();
  ASSERT_EQ(good->objects.size(), 1u);
  EXPECT_EQ(good->objects[0].key, "d/a");
  EXPECT_EQ(good->objects[0].size, 12u);
  EXPECT_TRUE(good->next_token.empty());
}

}  // namespace
}  // namespace reel::s3

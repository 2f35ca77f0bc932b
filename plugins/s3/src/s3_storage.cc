#include "s3_storage.h"

#include <algorithm>

#include "reel/glob.h"
#include "s3_files.h"

namespace reel::s3 {

Result<S3Path> ParseS3Uri(std::string_view uri, bool allow_empty_key) {
  constexpr std::string_view kScheme = "s3://";
  if (!uri.starts_with(kScheme))
    return InvalidArgumentError(std::string(uri) + ": not an s3:// URI");
  std::string_view rest = uri.substr(kScheme.size());
  size_t slash = rest.find('/');
  S3Path p;
  p.bucket = std::string(rest.substr(0, slash));
  if (slash != std::string_view::npos) p.key = std::string(rest.substr(slash + 1));
  if (p.bucket.empty())
    return InvalidArgumentError(std::string(uri) + ": no bucket (expected s3://bucket/key)");
  if (p.bucket.find_first_of("*?[") != std::string::npos)
    return InvalidArgumentError(std::string(uri) + ": wildcards are not allowed in the bucket");
  if (p.key.empty() && !allow_empty_key)
    return InvalidArgumentError(std::string(uri) + ": no key (expected s3://bucket/key)");
  return p;
}

namespace {

class S3Storage : public Storage {
 public:
  explicit S3Storage(std::shared_ptr<S3Client> client) : client_(std::move(client)) {}

  Result<std::vector<ObjectInfo>> Glob(std::string_view pattern) override {
    REEL_ASSIGN_OR_RETURN(S3Path p, ParseS3Uri(pattern, /*allow_empty_key=*/true));
    bool wild = HasGlob(p.key);
    std::string prefix(wild ? GlobPrefix(p.key) : std::string_view(p.key));
    std::vector<ObjectInfo> out;
    std::string token;
    do {
      // Parameters in canonical (sorted, encoded) order: curl signs the query as given.
      std::string query;
      if (!token.empty()) query += "continuation-token=" + UriEncode(token, false) + "&";
      query += "list-type=2&max-keys=1000&prefix=" + UriEncode(prefix, false);
      REEL_ASSIGN_OR_RETURN(S3Response r,
                            client_->Execute(MakeRequest("GET", p.bucket, "", query)));
      REEL_ASSIGN_OR_RETURN(ListPage page, ParseListPage(r.body, S3Client::Uri(p.bucket, prefix)));
      for (ListPage::Object& o : page.objects) {
        if (wild ? !GlobMatch(p.key, o.key) : o.key != p.key) continue;
        out.push_back({S3Client::Uri(p.bucket, o.key), o.size});
      }
      token = std::move(page.next_token);
    } while (!token.empty());
    std::sort(out.begin(), out.end(),
              [](const ObjectInfo& a, const ObjectInfo& b) { return a.uri < b.uri; });
    return out;
  }

  Result<std::unique_ptr<RandomAccessFile>> OpenRead(std::string_view uri) override {
    REEL_ASSIGN_OR_RETURN(S3Path p, ParseS3Uri(uri));
    Result<S3Response> head = client_->Execute(MakeRequest("HEAD", p.bucket, p.key));
    if (!head.ok()) return ExplainHeadFailure(p, head.status());
    return MakeS3Reader(client_, std::move(p.bucket), std::move(p.key), head->content_length,
                        head->etag);
  }

  Result<std::unique_ptr<WritableFile>> OpenWrite(std::string_view uri) override {
    REEL_ASSIGN_OR_RETURN(S3Path p, ParseS3Uri(uri));
    return MakeS3Writer(client_, std::move(p.bucket), std::move(p.key));
  }

  Status Delete(std::string_view uri) override {
    REEL_ASSIGN_OR_RETURN(S3Path p, ParseS3Uri(uri));
    // S3 answers 204 for a missing key too; the contract wants NotFound, hence the HEAD.
    Result<S3Response> head = client_->Execute(MakeRequest("HEAD", p.bucket, p.key));
    if (!head.ok()) return ExplainHeadFailure(p, head.status());
    return client_->Execute(MakeRequest("DELETE", p.bucket, p.key)).status();
  }

 private:
  // A HEAD error has no body, so it cannot say NoSuchBucket from NoSuchKey or which credential
  // failed. On a 4xx we ask again with a one-byte GET, whose error body carries the S3 code.
  Status ExplainHeadFailure(const S3Path& p, const Status& head_error) {
    if (head_error.code() != StatusCode::kNotFound &&
        head_error.code() != StatusCode::kPermissionDenied)
      return head_error;
    std::byte one[1];
    S3Request get = MakeRequest("GET", p.bucket, p.key);
    get.sink = {one, 1};
    Status s = client_->Execute(get).status();
    return s.ok() ? head_error : s;
  }

  std::shared_ptr<S3Client> client_;
};

}  // namespace

Result<std::unique_ptr<Storage>> MakeS3Storage(S3Config config) {
  REEL_ASSIGN_OR_RETURN(std::shared_ptr<S3Client> client, S3Client::Create(std::move(config)));
  return std::unique_ptr<Storage>(new S3Storage(std::move(client)));
}

}  // namespace reel::s3

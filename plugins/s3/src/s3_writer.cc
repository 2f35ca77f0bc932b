// S3Writer: see s3_files.h. PutObject for small objects, multipart upload for large ones;
// nothing becomes visible unless Close() succeeds.
#include <string>
#include <vector>

#include "s3_files.h"

namespace reel::s3 {
namespace {

class S3Writer : public WritableFile {
 public:
  S3Writer(std::shared_ptr<S3Client> client, std::string bucket, std::string key)
      : client_(std::move(client)),
        bucket_(std::move(bucket)),
        key_(std::move(key)),
        part_size_(static_cast<size_t>(client_->config().part_size)) {}

  // Destroyed without a successful Close(): drop the upload so no parts linger (best effort).
  ~S3Writer() override {
    if (!upload_id_.empty()) Abort();
  }

  Status Append(std::span<const std::byte> data) override {
    if (closed_) return FailedPreconditionError(Uri() + ": Append after Close");
    if (!error_.ok()) return error_;
    buffer_.append(reinterpret_cast<const char*>(data.data()), data.size());
    while (buffer_.size() >= part_size_) {
      Status s = UploadPart(std::string_view(buffer_).substr(0, part_size_));
      if (!s.ok()) return Fail(s);
      buffer_.erase(0, part_size_);
    }
    return Status::Ok();
  }

  Status Close() override {
    if (closed_) return FailedPreconditionError(Uri() + ": Close called twice");
    closed_ = true;
    if (!error_.ok()) return error_;
    if (upload_id_.empty()) {
      S3Request put = MakeRequest("PUT", bucket_, key_);
      put.body = buffer_;
      Status s = client_->Execute(put).status();
      buffer_.clear();
      return s;
    }
    if (!buffer_.empty()) {
      Status s = UploadPart(buffer_);
      if (!s.ok()) return Fail(s);
    }
    Status s = Complete();
    if (!s.ok()) return Fail(s);
    upload_id_.clear();
    return Status::Ok();
  }

 private:
  std::string Uri() const { return S3Client::Uri(bucket_, key_); }

  // Records the first error and aborts the upload: the object must not appear.
  Status Fail(Status s) {
    error_ = s;
    if (!upload_id_.empty()) Abort();
    return s;
  }

  Status Initiate() {
    REEL_ASSIGN_OR_RETURN(S3Response r,
                          client_->Execute(MakeRequest("POST", bucket_, key_, "uploads=")));
    upload_id_ = XmlValue(r.body, "UploadId");
    if (upload_id_.empty())
      return DataLossError(Uri() + ": CreateMultipartUpload answered without an UploadId");
    return Status::Ok();
  }

  Status UploadPart(std::string_view part) {
    if (upload_id_.empty()) REEL_RETURN_IF_ERROR(Initiate());
    int number = static_cast<int>(etags_.size()) + 1;
    std::string query =
        "partNumber=" + std::to_string(number) + "&uploadId=" + UriEncode(upload_id_, false);
    S3Request put = MakeRequest("PUT", bucket_, key_, query);
    put.body = part;
    REEL_ASSIGN_OR_RETURN(S3Response r, client_->Execute(put));
    if (r.etag.empty())
      return DataLossError(Uri() + ": UploadPart " + std::to_string(number) + " returned no ETag");
    etags_.push_back(r.etag);
    return Status::Ok();
  }

  Status Complete() {
    std::string xml = "<CompleteMultipartUpload>";
    for (size_t i = 0; i < etags_.size(); ++i) {
      std::string etag;
      for (char c : etags_[i]) etag += c == '"' ? std::string("&quot;") : std::string(1, c);
      xml += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" + etag +
             "</ETag></Part>";
    }
    xml += "</CompleteMultipartUpload>";
    S3Request post = MakeRequest("POST", bucket_, key_, "uploadId=" + UriEncode(upload_id_, false));
    post.body = xml;
    REEL_ASSIGN_OR_RETURN(S3Response r, client_->Execute(post));
    // S3 may answer 200 and still fail the completion; the error is then in the body.
    if (r.body.find("<Error>") != std::string::npos)
      return UnavailableError("POST " + Uri() + " (bucket '" + bucket_ + "', key '" + key_ +
                              "'): CompleteMultipartUpload failed: S3 error " +
                              XmlValue(r.body, "Code") + ": " + XmlValue(r.body, "Message"));
    return Status::Ok();
  }

  void Abort() {
    // Best effort: a failure here leaves an incomplete upload, which S3 never shows as an
    // object (and bucket lifecycle rules clean up).
    (void)client_
        ->Execute(MakeRequest("DELETE", bucket_, key_, "uploadId=" + UriEncode(upload_id_, false)))
        .status();
    upload_id_.clear();
  }

  std::shared_ptr<S3Client> client_;
  const std::string bucket_, key_;
  const size_t part_size_;
  std::string buffer_;
  std::string upload_id_;           // non-empty while a multipart upload is open
  std::vector<std::string> etags_;  // ETag of part i+1
  bool closed_ = false;
  Status error_;
};

}  // namespace

std::unique_ptr<WritableFile> MakeS3Writer(std::shared_ptr<S3Client> client, std::string bucket,
                                           std::string key) {
  return std::make_unique<S3Writer>(std::move(client), std::move(bucket), std::move(key));
}

}  // namespace reel::s3

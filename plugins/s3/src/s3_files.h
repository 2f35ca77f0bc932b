// S3Reader and S3Writer: the RandomAccessFile and WritableFile behind the `s3` storage.
//
// S3Reader splits the object into blocks of `read_ahead` bytes. A small read is served from
// cached blocks; when reads walk forward through the object (a TFRecord scan) the next
// `parallel_ranges` blocks are fetched in the background, each by one ranged GET, so the network
// stays busy while the caller parses. A read of at least one block goes straight into the
// caller's buffer with up to `parallel_ranges` ranged GETs in flight. Read() is thread-safe.
//
// S3Writer buffers appended bytes. If Close() comes before `part_size` bytes it sends one
// PutObject; otherwise it starts a multipart upload and sends each full part as it fills, and
// Close() sends the rest and completes the upload. A failed Close(), or destruction without
// Close(), aborts the multipart upload, so the key never shows a partial object. Single-threaded.
#ifndef REEL_PLUGINS_S3_SRC_S3_FILES_H_
#define REEL_PLUGINS_S3_SRC_S3_FILES_H_

#include <memory>
#include <string>

#include "reel/storage.h"
#include "s3_client.h"

namespace reel::s3 {

// `size` and `etag` come from the caller's HEAD: every read is of that version of the object
// (S3Request::if_match). REQUIRES: client != nullptr.
std::unique_ptr<RandomAccessFile> MakeS3Reader(std::shared_ptr<S3Client> client, std::string bucket,
                                               std::string key, uint64_t size, std::string etag);

std::unique_ptr<WritableFile> MakeS3Writer(std::shared_ptr<S3Client> client, std::string bucket,
                                           std::string key);

}  // namespace reel::s3

#endif  // REEL_PLUGINS_S3_SRC_S3_FILES_H_

// The `s3` Storage: "s3://bucket/key" objects on S3 or an S3-compatible server.
//
//   Glob      ListObjectsV2 under the pattern's literal prefix (continuation tokens, any number
//             of keys), filtered with reel::GlobMatch, sorted by URI.
//   OpenRead  HEAD for the size, then ranged GETs (S3Reader: read-ahead, parallel ranges).
//   OpenWrite S3Writer: PutObject on Close, multipart upload past one part; nothing visible
//             unless Close succeeds.
//   Delete    NotFound when the object does not exist (S3's DELETE alone would not say).
//
// Thread-safety: every method may be called concurrently; the storage shares one S3Client (and
// its connection pool) with the files it opens, which keep it alive.
#ifndef REEL_PLUGINS_S3_SRC_S3_STORAGE_H_
#define REEL_PLUGINS_S3_SRC_S3_STORAGE_H_

#include <memory>
#include <string>
#include <string_view>

#include "reel/storage.h"
#include "s3_client.h"
#include "s3_config.h"

namespace reel::s3 {

struct S3Path {
  std::string bucket;
  std::string key;
};

// Splits "s3://bucket/key"; InvalidArgument for another scheme or an empty bucket. The key may
// be empty ("s3://bucket" or "s3://bucket/") only when `allow_empty_key`.
Result<S3Path> ParseS3Uri(std::string_view uri, bool allow_empty_key = false);

Result<std::unique_ptr<Storage>> MakeS3Storage(S3Config config);

}  // namespace reel::s3

#endif  // REEL_PLUGINS_S3_SRC_S3_STORAGE_H_

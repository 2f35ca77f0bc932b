// Plugin entry: registers the `s3` Storage (serves "s3://bucket/key" URIs).
#include "reel/plugin.h"
#include "s3_config.h"
#include "s3_storage.h"

namespace {

reel::Status Register(reel::Registrar& r) {
  return r.Add<reel::Storage>(
      {"s3", "S3 and S3-compatible object stores (s3://bucket/key)", reel::s3::S3OptionSchema()},
      [](const reel::Options& o) -> reel::Result<std::unique_ptr<reel::Storage>> {
        REEL_ASSIGN_OR_RETURN(reel::s3::S3Config config,
                              reel::s3::ResolveS3Config(o, reel::s3::ProcessEnv()));
        return reel::s3::MakeS3Storage(std::move(config));
      });
}

}  // namespace

REEL_PLUGIN("s3", "0.1.0", "S3 storage: ranged reads, multipart writes, SigV4 via libcurl",
            Register)

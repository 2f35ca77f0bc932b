// libFuzzer target: the XML bodies an S3 endpoint sends back (plugins/s3): ListObjectsV2 pages,
// error documents (<Error><Code>…</Code><Message>…</Message></Error>) and
// CreateMultipartUpload answers. The input is one body. A parsed listing must hold only
// entries with a key, and a truncated one must carry its continuation token.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "s3_client.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reel::s3;
  const std::string_view xml(reinterpret_cast<const char*>(data), size);
  reel::Result<ListPage> page = ParseListPage(xml, "s3://fuzz/prefix");
  if (page.ok()) {
    for (const ListPage::Object& o : page->objects)
      if (o.key.empty()) std::abort();
    if (XmlValue(xml, "IsTruncated") == "true" && page->next_token.empty()) std::abort();
  } else if (page.status().code() != reel::StatusCode::kDataLoss) {
    std::abort();
  }
  for (std::string_view tag : {"Code", "Message", "UploadId", "ETag", "Key"})
    (void)XmlValue(xml, tag);
  return 0;
}

// Built with `pkg-config --cflags --libs reel-recordio` by check_install.sh: prints the masked
// CRC32C of "foo" (0xfebe8a61 in docs/formats.md's test vectors), as the installed CRC functions
// compute it and as a record written and read back through the installed test doubles
// (reel/testing/mem_file.h) stores it: the last four bytes of the record's framing.
#include <cstdio>
#include <cstring>
#include <memory>

#include "reel/recordio.h"
#include "reel/testing/mem_file.h"

int main() {
  std::string bytes;
  auto writer =
      reel::recordio::RecordWriter::Create(std::make_unique<reel::testing::MemWritable>(&bytes));
  if (!writer.ok() || !(*writer)->Write("foo").ok() || !(*writer)->Close().ok()) return 1;
  reel::testing::MemFile file("mem://foo.tfrecord", bytes);
  reel::recordio::RecordReader reader(&file);
  std::string record;
  if (!reader.ReadRecord(&record).ok() || record != "foo") return 2;
  uint32_t stored = 0;
  std::memcpy(&stored, bytes.data() + bytes.size() - 4, 4);  // little-endian, as the machine
  std::printf("0x%08x 0x%08x\n", reel::recordio::MaskCrc(reel::recordio::Crc32c("foo")), stored);
  return 0;
}

// Built with `pkg-config --cflags --libs reel-recordio` by check_install.sh: prints the masked
// CRC32C of "foo" (0xfebe8a61 in docs/formats.md's test vectors).
#include <cstdio>

#include "reel/recordio.h"

int main() {
  std::printf("0x%08x\n", reel::recordio::MaskCrc(reel::recordio::Crc32c("foo")));
  return 0;
}

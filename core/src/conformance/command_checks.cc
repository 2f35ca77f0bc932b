// Command conformance (reel/command.h): a usage line that starts with the command's name, and an
// unknown flag refused as a usage error (InvalidArgument) without running anything. The command
// runs in a fresh temporary directory, so a command that does write something writes it there.
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "checks.h"

namespace reel::core::conformance_internal {

void CheckCommand(const Registry& registry, const ComponentEntry& entry, StorageResolver& storage,
                  const CheckSink& sink) {
  const std::string& name = entry.info.name;
  Result<Owned<Command>> made = registry.CreateCommand(name);
  if (!Report(sink, "creates", made.status())) return;
  const std::string usage = (*made)->Usage();
  Report(sink, "its usage starts with 'reel " + name + "'",
         usage.rfind("reel " + name, 0) == 0 ? Status::Ok()
                                             : InvalidArgumentError("usage is '" + usage + "'"));
  std::error_code ec;
  const auto cwd = std::filesystem::current_path(ec);
  std::string dir = (std::filesystem::temp_directory_path() / "reel-check-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr || ::chdir(dir.c_str()) != 0)
    return (void)Report(sink, "an unknown flag is a usage error",
                        InternalError("cannot make and enter a temporary directory"));
  std::ostringstream out, err;
  CommandContext ctx{&storage, &out, &err};
  Status s = (*made)->Run({"--reel-check-unknown-flag"}, ctx);
  if (::chdir(cwd.c_str()) != 0) ec = std::make_error_code(std::errc::io_error);
  std::filesystem::remove_all(dir, ec);
  Report(sink, "an unknown flag is a usage error (InvalidArgument)",
         ExpectCode(s, StatusCode::kInvalidArgument, "Run({\"--reel-check-unknown-flag\"})"));
}

}  // namespace reel::core::conformance_internal

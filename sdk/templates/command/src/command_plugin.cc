// A command plugin: `reel linecount FILE...` prints the lines and bytes of each file, read
// through the host's storage (so s3:// or any scheme a plugin serves works as a path does). Copy
// it and replace Run; the rules it follows are those of reel/command.h:
//   - Usage() is one line starting with "reel NAME";
//   - a usage error (an unknown flag, no file) is InvalidArgument: the host prints it and the
//     usage; any other error is a Status naming the file;
//   - results go to ctx.out, diagnostics to ctx.err.
#include <algorithm>
#include <memory>

#include "reel/plugin.h"

namespace {

class LineCount final : public reel::Command {
 public:
  std::string Usage() const override { return "reel linecount FILE..."; }

  reel::Status Run(const std::vector<std::string>& args, reel::CommandContext& ctx) override {
    if (args.empty()) return reel::InvalidArgumentError("name at least one file");
    for (const std::string& a : args)
      if (a.rfind("--", 0) == 0) return reel::InvalidArgumentError("unknown flag '" + a + "'");
    for (const std::string& uri : args) {
      REEL_ASSIGN_OR_RETURN(reel::Storage * storage, ctx.storage->ForUri(uri));
      REEL_ASSIGN_OR_RETURN(std::string bytes, reel::ReadAll(*storage, uri));
      const auto lines = std::count(bytes.begin(), bytes.end(), '\n');
      *ctx.out << lines << " lines " << bytes.size() << " bytes " << uri << "\n";
    }
    return reel::Status::Ok();
  }
};

reel::Status Register(reel::Registrar& r) {
  return r.Add<reel::Command>({"linecount", "count the lines and bytes of files", {}},
                              []() -> reel::Result<std::unique_ptr<reel::Command>> {
                                return std::unique_ptr<reel::Command>(new LineCount());
                              });
}

}  // namespace

REEL_PLUGIN("template_command", "0.1.0", "Template command plugin: copy me", Register)

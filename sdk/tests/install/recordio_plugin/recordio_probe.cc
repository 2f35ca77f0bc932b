// A plugin command that writes two TFRecords through the host's storage with reel::recordio and
// reads them back: `reel recordio_probe FILE` prints the records and the file's size.
#include "reel/plugin.h"
#include "reel/recordio.h"

namespace {

class RecordioProbe final : public reel::Command {
 public:
  std::string Usage() const override { return "reel recordio_probe FILE"; }
  reel::Status Run(const std::vector<std::string>& args, reel::CommandContext& ctx) override {
    if (args.size() != 1) return reel::InvalidArgumentError("name one file");
    REEL_ASSIGN_OR_RETURN(reel::Storage * storage, ctx.storage->ForUri(args[0]));
    REEL_ASSIGN_OR_RETURN(auto file, storage->OpenWrite(args[0]));
    REEL_ASSIGN_OR_RETURN(auto writer, reel::recordio::RecordWriter::Create(std::move(file)));
    REEL_RETURN_IF_ERROR(writer->Write("foo"));
    REEL_RETURN_IF_ERROR(writer->Write("bar"));
    REEL_RETURN_IF_ERROR(writer->Close());
    REEL_ASSIGN_OR_RETURN(auto in, storage->OpenRead(args[0]));
    REEL_ASSIGN_OR_RETURN(uint64_t size, in->Size());
    reel::recordio::RecordReader reader(in.get());
    std::string record;
    while (reader.ReadRecord(&record).ok()) *ctx.out << record << " ";
    *ctx.out << size << " bytes\n";
    return reel::Status::Ok();
  }
};

reel::Status Register(reel::Registrar& r) {
  return r.Add<reel::Command>({"recordio_probe", "writes and reads TFRecords", {}},
                              []() -> reel::Result<std::unique_ptr<reel::Command>> {
                                return std::unique_ptr<reel::Command>(new RecordioProbe());
                              });
}

}  // namespace

REEL_PLUGIN("recordio_probe", "1.0.0", "Uses the installed reel::recordio", Register)

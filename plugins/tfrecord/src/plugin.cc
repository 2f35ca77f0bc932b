// The tfrecord plugin's entry point: registers the `tfrecord` data source and the `synth` and
// `inspect` commands.
#include "reel/plugin.h"

#include "commands.h"
#include "tfrecord_source.h"

namespace {

reel::Status Register(reel::Registrar& r) {
  REEL_RETURN_IF_ERROR(r.Add<reel::DataSource>(
      {"tfrecord", "TFRecord files of YouTube-8M Examples/SequenceExamples from any storage",
       reel::tfrecord::TfRecordSourceSchema()},
      &reel::tfrecord::CreateTfRecordSource));
  REEL_RETURN_IF_ERROR(r.Add<reel::Command>(
      {"synth", "write synthetic YouTube-8M shards with a learnable signal", {}},
      []() -> reel::Result<std::unique_ptr<reel::Command>> {
        return reel::tfrecord::MakeSynthCommand();
      }));
  return r.Add<reel::Command>(
      {"inspect", "list the records of TFRecord files (ids, labels, feature shapes, errors)", {}},
      []() -> reel::Result<std::unique_ptr<reel::Command>> {
        return reel::tfrecord::MakeInspectCommand();
      });
}

}  // namespace

REEL_PLUGIN("tfrecord", "0.1.0", "TFRecord / YouTube-8M data source, synth and inspect", Register)

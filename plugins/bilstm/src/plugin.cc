// The bilstm plugin: bilstm_video, bilstm_audio and two_stream on oneDNN's LSTM primitives.
#include "reel/plugin.h"

#include "bilstm_model.h"

namespace {

reel::ModelFactory Factory(std::string kind) {
  return [kind](const reel::Options& o,
                const reel::ModelContext& c) -> reel::Result<std::unique_ptr<reel::Model>> {
    REEL_ASSIGN_OR_RETURN(auto model, reel::bilstm::BiLstmModel::Create(kind, o, c));
    return std::unique_ptr<reel::Model>(std::move(model));
  };
}

reel::Status Register(reel::Registrar& r) {
  using reel::bilstm::BiLstmOptions;
  REEL_RETURN_IF_ERROR(r.Add<reel::Model>(
      {"bilstm_video", "bidirectional LSTM over the rgb frames (oneDNN), logistic or MoE head",
       BiLstmOptions("rgb", 1024, 256)},
      Factory("bilstm_video")));
  REEL_RETURN_IF_ERROR(r.Add<reel::Model>(
      {"bilstm_audio", "bidirectional LSTM over the audio frames (oneDNN), logistic or MoE head",
       BiLstmOptions("audio", 128, 128)},
      Factory("bilstm_audio")));
  return r.Add<reel::Model>(
      {"two_stream", "rgb and audio bidirectional LSTMs trained jointly into one head",
       reel::bilstm::TwoStreamOptions()},
      Factory("two_stream"));
}

}  // namespace

REEL_PLUGIN("bilstm", "0.1.0", "BiLSTM video classifiers on oneDNN (video, audio, two-stream)",
            Register)

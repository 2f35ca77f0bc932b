// Synthetic YouTube-8M data with a planted, learnable signal (what `reel synth` writes).
//
// Every class c has a fixed random sign pattern p_c in {-a, +a}^D for rgb and for audio. A video
// gets 1..max_labels distinct classes; each of its frames is
//     x_t = s_t * sum over its classes c of p_c  +  noise,   s_t ~ U(0.5, 1.5), noise ~ N(0, sigma)
// clipped to [-2, 2] and quantized as YouTube-8M does; lengths are uniform in
// [min_frames, max_frames]. Video-level data stores the mean of the dequantized frames.
//
// split: even classes show their pattern only in rgb and odd classes only in audio, so a model
// that sees a single stream can learn at most half of the classes and a two-stream model all.
//
// Records go round-robin to `shards` files named <out>/<prefix>NNNN.tfrecord (".gz" / ".zlib"
// appended when compressed). Output is a deterministic function of the options.
//
// test_videos > 0: a held-out split of the same planted signal. Videos 0..videos-1 go to
// <out>/train/<prefix>NNNN, videos videos..videos+test_videos-1 (other ids, other frames, the
// same class patterns) to <out>/test/testNNNN, each over `shards` files.
// Thread-safety: WriteSynthetic may run concurrently for different outputs.
#ifndef REEL_PLUGINS_TFRECORD_SRC_SYNTH_H_
#define REEL_PLUGINS_TFRECORD_SRC_SYNTH_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "reel/recordio.h"
#include "reel/storage.h"
#include "yt8m.h"

namespace reel::tfrecord {

struct SynthOptions {
  std::string out;  // directory (URI or path); created if the storage has directories
  int64_t videos = 1000;
  int64_t classes = 10;
  Level level = Level::kFrame;
  int64_t shards = 4;
  uint64_t seed = 1;
  int64_t min_frames = 60;
  int64_t max_frames = 180;
  int64_t max_labels = 3;
  int64_t rgb_dim = 1024;
  int64_t audio_dim = 128;
  double amplitude = 0.5;  // a: per-value size of a class pattern
  double noise = 0.8;      // sigma
  bool split = false;
  std::string prefix = "train";
  int64_t test_videos = 0;  // > 0: <out>/train/ and a held-out <out>/test/ (see above)
  recordio::Compression compression = recordio::Compression::kNone;
};

// The labels and the serialized Example/SequenceExample of video `index` (ids "vNNNNNNN").
struct SynthVideo {
  std::string id;
  std::vector<int64_t> labels;
  std::string payload;
};
SynthVideo MakeSyntheticVideo(const SynthOptions& options, int64_t index);

// Writes every shard; returns the URIs written. InvalidArgument names a bad option.
Result<std::vector<std::string>> WriteSynthetic(StorageResolver& storage,
                                                const SynthOptions& options);

}  // namespace reel::tfrecord

#endif  // REEL_PLUGINS_TFRECORD_SRC_SYNTH_H_

// Synthetic YouTube-8M shards (see synth.h).
#include "synth.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>

#include "example.pb.h"
#include "record_stream.h"

namespace reel::tfrecord {
namespace {

// Standard normal samples drawn once; noise indexes them with a cheap generator, which is plenty
// for planting a signal and ~20x faster than std::normal_distribution.
const std::array<float, 4096>& NormalTable() {
  static const std::array<float, 4096> table = [] {
    std::array<float, 4096> t{};
    std::mt19937_64 rng(12345);
    std::normal_distribution<float> normal;
    for (float& v : t) v = normal(rng);
    return t;
  }();
  return table;
}

struct XorShift {
  uint64_t s;
  uint64_t operator()() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  double Uniform() { return static_cast<double>((*this)() >> 11) * 0x1.0p-53; }
};

// Sign pattern of class c for one stream (0 rgb, 1 audio): bit d says +a or -a.
bool PatternBit(uint64_t seed, int64_t c, int stream, int64_t d) {
  uint64_t h = MixSeed(MixSeed(seed, static_cast<uint64_t>(c) * 2 + static_cast<uint64_t>(stream)),
                       static_cast<uint64_t>(d) / 64);
  return (h >> (static_cast<uint64_t>(d) % 64)) & 1;
}

bool Visible(const SynthOptions& o, int64_t c, int stream) {
  return !o.split || (c % 2 == 0) == (stream == 0);
}

// One stream's frames (quantized, frames x dim).
std::vector<uint8_t> MakeFrames(const SynthOptions& o, const std::vector<int64_t>& labels,
                                int stream, int64_t frames, XorShift& rng) {
  const int64_t dim = stream == 0 ? o.rgb_dim : o.audio_dim;
  std::vector<float> pattern(static_cast<size_t>(dim), 0.0f);
  for (int64_t c : labels) {
    if (!Visible(o, c, stream)) continue;
    for (int64_t d = 0; d < dim; ++d)
      pattern[static_cast<size_t>(d)] +=
          static_cast<float>(PatternBit(o.seed, c, stream, d) ? o.amplitude : -o.amplitude);
  }
  const auto& normal = NormalTable();
  const auto sigma = static_cast<float>(o.noise);
  std::vector<uint8_t> out(static_cast<size_t>(frames * dim));
  for (int64_t t = 0; t < frames; ++t) {
    auto strength = static_cast<float>(0.5 + rng.Uniform());
    uint8_t* row = out.data() + t * dim;
    for (int64_t d = 0; d < dim; ++d) {
      float x = strength * pattern[static_cast<size_t>(d)] + sigma * normal[rng() & 4095];
      row[d] = Quantize(x);
    }
  }
  return out;
}

void SetLabels(const SynthVideo& v, reel::tf::Features* features) {
  auto& map = *features->mutable_feature();
  map["id"].mutable_bytes_list()->add_value(v.id);
  auto* labels = map["labels"].mutable_int64_list();
  for (int64_t c : v.labels) labels->add_value(c);
}

// Videos first..first+count-1, round-robin over o.shards files named <stem>NNNN<suffix>.
Result<std::vector<std::string>> WriteShards(Storage& storage, const SynthOptions& o,
                                             const std::string& stem, int64_t first,
                                             int64_t count) {
  std::string suffix = o.compression == recordio::Compression::kGzip   ? ".tfrecord.gz"
                       : o.compression == recordio::Compression::kZlib ? ".tfrecord.zlib"
                                                                       : ".tfrecord";
  std::vector<std::string> uris;
  for (int64_t k = 0; k < o.shards; ++k) {
    char name[32];
    std::snprintf(name, sizeof(name), "%04lld", static_cast<long long>(k));
    std::string uri = stem + name + suffix;
    REEL_ASSIGN_OR_RETURN(auto file, storage.OpenWrite(uri));
    REEL_ASSIGN_OR_RETURN(auto writer, recordio::RecordWriter::Create(
                                           std::move(file), {.compression = o.compression}));
    for (int64_t v = k; v < count; v += o.shards)
      REEL_RETURN_IF_ERROR(
          writer->Write(MakeSyntheticVideo(o, first + v).payload).WithContext(uri));
    REEL_RETURN_IF_ERROR(writer->Close().WithContext(uri));
    uris.push_back(uri);
  }
  return uris;
}

}  // namespace

SynthVideo MakeSyntheticVideo(const SynthOptions& o, int64_t index) {
  XorShift rng{MixSeed(o.seed, static_cast<uint64_t>(index)) | 1};
  SynthVideo v;
  char id[16];
  std::snprintf(id, sizeof(id), "v%07lld", static_cast<long long>(index));
  v.id = id;
  int64_t n_labels =
      1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(std::min(o.max_labels, o.classes)));
  while (static_cast<int64_t>(v.labels.size()) < n_labels) {
    auto c = static_cast<int64_t>(rng() % static_cast<uint64_t>(o.classes));
    if (std::find(v.labels.begin(), v.labels.end(), c) == v.labels.end()) v.labels.push_back(c);
  }
  std::sort(v.labels.begin(), v.labels.end());
  int64_t frames =
      o.min_frames +
      static_cast<int64_t>(rng() % static_cast<uint64_t>(o.max_frames - o.min_frames + 1));
  std::vector<uint8_t> rgb = MakeFrames(o, v.labels, 0, frames, rng);
  std::vector<uint8_t> audio = MakeFrames(o, v.labels, 1, frames, rng);
  if (o.level == Level::kFrame) {
    reel::tf::SequenceExample se;
    SetLabels(v, se.mutable_context());
    auto& lists = *se.mutable_feature_lists()->mutable_feature_list();
    for (int stream = 0; stream < 2; ++stream) {
      const std::vector<uint8_t>& q = stream == 0 ? rgb : audio;
      const int64_t dim = stream == 0 ? o.rgb_dim : o.audio_dim;
      auto& list = lists[stream == 0 ? "rgb" : "audio"];
      for (int64_t t = 0; t < frames; ++t)
        list.add_feature()->mutable_bytes_list()->add_value(std::string(
            reinterpret_cast<const char*>(q.data() + t * dim), static_cast<size_t>(dim)));
    }
    se.SerializeToString(&v.payload);
  } else {
    reel::tf::Example ex;
    SetLabels(v, ex.mutable_features());
    auto& map = *ex.mutable_features()->mutable_feature();
    for (int stream = 0; stream < 2; ++stream) {
      const std::vector<uint8_t>& q = stream == 0 ? rgb : audio;
      const int64_t dim = stream == 0 ? o.rgb_dim : o.audio_dim;
      auto* list = map[stream == 0 ? "mean_rgb" : "mean_audio"].mutable_float_list();
      for (int64_t d = 0; d < dim; ++d) {
        double sum = 0;
        for (int64_t t = 0; t < frames; ++t) sum += Dequantize(q[static_cast<size_t>(t * dim + d)]);
        list->add_value(static_cast<float>(sum / static_cast<double>(frames)));
      }
    }
    ex.SerializeToString(&v.payload);
  }
  return v;
}

Result<std::vector<std::string>> WriteSynthetic(StorageResolver& resolver, const SynthOptions& o) {
  auto bad = [](const std::string& m) { return InvalidArgumentError("synth: " + m); };
  if (o.out.empty()) return bad("--out is required");
  if (o.videos < 0) return bad("--videos must be >= 0");
  if (o.classes < 1) return bad("--classes must be >= 1");
  if (o.shards < 1) return bad("--shards must be >= 1");
  if (o.min_frames < 1 || o.max_frames < o.min_frames)
    return bad("need 1 <= --min-frames <= --max-frames");
  if (o.max_labels < 1) return bad("--max-labels must be >= 1");
  if (o.rgb_dim < 1 || o.audio_dim < 1) return bad("feature sizes must be >= 1");
  if (o.noise < 0 || o.amplitude < 0) return bad("--noise and --amplitude must be >= 0");
  if (o.split && o.classes < 2) return bad("--split needs at least 2 classes");
  if (o.test_videos < 0) return bad("--test-videos must be >= 0");
  REEL_ASSIGN_OR_RETURN(Storage * storage, resolver.ForUri(o.out));
  REEL_RETURN_IF_ERROR(storage->CreateDir(o.out));
  const std::string out = o.out + (o.out.back() == '/' ? "" : "/");
  if (o.test_videos == 0) return WriteShards(*storage, o, out + o.prefix, 0, o.videos);
  REEL_RETURN_IF_ERROR(storage->CreateDir(out + "train"));
  REEL_RETURN_IF_ERROR(storage->CreateDir(out + "test"));
  REEL_ASSIGN_OR_RETURN(auto uris,
                        WriteShards(*storage, o, out + "train/" + o.prefix, 0, o.videos));
  REEL_ASSIGN_OR_RETURN(auto test,
                        WriteShards(*storage, o, out + "test/test", o.videos, o.test_videos));
  uris.insert(uris.end(), test.begin(), test.end());
  return uris;
}

}  // namespace reel::tfrecord

// Writes the seed corpora of the binary fuzz targets, from real inputs: synthetic YouTube-8M
// records and shards (the synth code behind `reel synth`, at real and at small widths, in all
// three compressions), the first records of the real shards under data/yt8m/ when the checkout
// has them, and checkpoints encoded as the trainer encodes them.
//
//   make_fuzz_seeds OUT_DIR [REAL_SHARD ...]
//
// writes OUT_DIR/<target>/<name> for tfrecord_framing, yt8m_decode and checkpoint. Each seed is
// small (a few records of a few frames) so a fuzzer mutates meaningful bytes, not bulk.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "checkpoint.pb.h"
#include "reel/core/checkpoint.h"
#include "reel/recordio.h"
#include "reel/testing/mem_file.h"
#include "synth.h"

namespace reel {
namespace {

namespace fs = std::filesystem;

void Put(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

// The records framed into one file in memory, in `compression`.
std::string Frame(const std::vector<std::string>& records, recordio::Compression compression) {
  std::string out;
  recordio::RecordWriterOptions options;
  options.compression = compression;
  auto writer =
      recordio::RecordWriter::Create(std::make_unique<testing::MemWritable>(&out), options);
  if (!writer.ok()) std::abort();
  for (const std::string& r : records)
    if (!(*writer)->Write(r).ok()) std::abort();
  if (!(*writer)->Close().ok()) std::abort();
  return out;
}

std::vector<std::string> SynthRecords(tfrecord::Level level, int64_t rgb, int64_t audio,
                                      int64_t max_frames, int count) {
  tfrecord::SynthOptions o;
  o.level = level;
  o.classes = 20;
  o.rgb_dim = rgb;
  o.audio_dim = audio;
  o.min_frames = 1;
  o.max_frames = max_frames;
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) out.push_back(tfrecord::MakeSyntheticVideo(o, i).payload);
  return out;
}

// The first `count` records of a real shard.
std::vector<std::string> FirstRecords(const std::string& path, int count) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  testing::MemFile file(path, std::move(bytes));
  recordio::RecordReaderOptions options;
  options.compression = recordio::CompressionForUri(path);
  recordio::RecordReader reader(&file, options);
  std::vector<std::string> out(1);
  while (static_cast<int>(out.size()) <= count && reader.ReadRecord(&out.back()).ok())
    out.emplace_back();
  out.pop_back();
  return out;
}

core::CheckpointState SomeCheckpoint(int blocks, int64_t step) {
  core::CheckpointState s;
  s.model_name = "two_stream";
  for (int b = 0; b < blocks; ++b) {
    core::CheckpointState::Block block{"layer" + std::to_string(b) + "/w", {2, b + 1}, {}};
    for (int64_t i = 0; i < NumElements(block.shape); ++i) block.values.push_back(0.5f * i - b);
    s.params.push_back(std::move(block));
  }
  s.optimizer_state = std::string("adam\0\x01\x02", 7);
  s.step = step;
  s.epoch = step / 10;
  s.schedule_step = step;
  s.data_positions = {"tfrecord:1:" + std::to_string(step), "tfrecord:1:7"};
  s.config_text = "trainer { steps: 100 }\n";
  s.seed = 42;
  s.examples_seen = step * 32;
  s.world_size = 2;
  s.wall_time = 1.7e9;
  s.train_seconds = 12.5;
  return s;
}

}  // namespace
}  // namespace reel

int main(int argc, char** argv) {
  using namespace reel;
  using recordio::Compression;
  if (argc < 2) {
    std::cerr << "usage: make_fuzz_seeds OUT_DIR [REAL_SHARD ...]\n";
    return 2;
  }
  const fs::path out = argv[1];
  const fs::path framing = out / "tfrecord_framing", decode = out / "yt8m_decode",
                 ckpt = out / "checkpoint";

  struct Kind {
    const char* name;
    tfrecord::Level level;
    int64_t rgb, audio, frames;
  };
  const Kind kinds[] = {{"frame_small", tfrecord::Level::kFrame, 16, 8, 4},
                        {"frame_full", tfrecord::Level::kFrame, 1024, 128, 2},
                        {"video_small", tfrecord::Level::kVideo, 16, 8, 4},
                        {"video_full", tfrecord::Level::kVideo, 1024, 128, 2}};
  for (const Kind& k : kinds) {
    std::vector<std::string> records = SynthRecords(k.level, k.rgb, k.audio, k.frames, 3);
    for (size_t i = 0; i < records.size(); ++i)
      Put(decode, std::string("synth_") + k.name + "_" + std::to_string(i), records[i]);
    if (k.rgb > 16) continue;  // framing seeds stay small
    Put(framing, std::string("synth_") + k.name + ".tfrecord", Frame(records, Compression::kNone));
    Put(framing, std::string("synth_") + k.name + ".tfrecord.zlib",
        Frame(records, Compression::kZlib));
    Put(framing, std::string("synth_") + k.name + ".tfrecord.gz",
        Frame(records, Compression::kGzip));
  }
  Put(framing, "empty", "");
  Put(framing, "one_empty_record", Frame({""}, Compression::kNone));
  Put(framing, "short_records", Frame({"a", "bc", std::string(300, 'x')}, Compression::kNone));

  for (int i = 2; i < argc; ++i) {
    const std::string name = fs::path(argv[i]).filename().string();
    std::vector<std::string> records = FirstRecords(argv[i], 3);
    for (size_t r = 0; r < records.size(); ++r)
      Put(decode, "real_" + name + "_" + std::to_string(r), records[r]);
    if (!records.empty()) {
      Put(framing, "real_" + name, Frame({records[0]}, Compression::kNone));
      Put(framing, "real_" + name + ".gz", Frame({records[0]}, Compression::kGzip));
    }
  }

  // Whole objects, and their payloads alone (the target also decodes its input as a payload).
  const std::pair<const char*, core::CheckpointState> states[] = {
      {"one_block", SomeCheckpoint(1, 100)},
      {"three_blocks", SomeCheckpoint(3, 2000)},
      {"empty_state", core::CheckpointState{}}};
  for (const auto& [name, state] : states) {
    const std::string file = core::EncodeCheckpoint(state);
    Put(ckpt, name, file);
    checkpoint::CheckpointFile envelope;
    if (!envelope.ParseFromString(file)) std::abort();
    Put(ckpt, std::string(name) + "_payload", envelope.payload());
  }
  return 0;
}

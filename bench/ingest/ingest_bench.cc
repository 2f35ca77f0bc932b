// ingest_frame: input bytes per second of synthetic frame-level YouTube-8M shards turned into
// dequantized padded Batches by the tfrecord data source on one core (prefetch 0, so parsing runs
// on the calling thread), beside, over the same bytes in the same run:
//   decode_only the ingest pass's reading, CRCs and wire decoding, without building batches
//   crc_reader  RecordReader over the same files: read + framing + both CRCs, no parsing
//   store_floor the ingest pass's output bytes written with streaming stores and nothing else
//               (the memory-bandwidth limit of the output side), per input byte
//   crc32c      Crc32c over the bytes already in memory (the hardware instruction's rate)
//   memcpy      memcpy of the bytes already in memory
// Passes alternate, `reps` times each; the median is reported. Writes JSON + Markdown.
//
//   ingest_bench [--dir DIR] [--videos N] [--reps R] [--out RESULTS_DIR] [--keep]
#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "local_storage.h"
#include "reel/recordio.h"
#include "synth.h"
#include "tfrecord_source.h"
#include "yt8m.h"

namespace {

using reel::Status;
using reel::bench::Clock;
using reel::bench::Median;
using reel::bench::Seconds;

struct Config {
  std::string dir = "/tmp/reel_ingest_bench";
  int64_t videos = 1500;
  int reps = 5;
  std::string out = "bench/out";
  bool keep = false;
  bool ingest_only = false;
};

// Throws nothing; exits on a failed status, since a benchmark has no one to report to.
template <typename T>
T Check(reel::Result<T> r, const char* what) {
  if (!r.ok()) {
    std::cerr << what << ": " << r.status() << "\n";
    std::exit(1);
  }
  return std::move(r).value();
}
void Check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::cerr << what << ": " << s << "\n";
    std::exit(1);
  }
}

// One epoch of the source, as a training loop drives it: the source lives across epochs (its
// batch storage is recycled, not faulted in afresh), and each epoch starts with StartEpoch.
int64_t IngestPass(reel::DataSource& src, int64_t epoch, int64_t* videos, int64_t* frames,
                   int64_t* out_bytes) {
  Check(src.StartEpoch(epoch), "start epoch");
  *videos = 0;
  *frames = 0;
  *out_bytes = 0;
  while (true) {
    auto b = src.Next();
    if (!b.ok()) {
      if (b.status().code() != reel::StatusCode::kOutOfRange) Check(b.status(), "ingest");
      break;
    }
    *videos += b->size();
    for (int32_t len : b->features.at("rgb").lengths) *frames += len;
    for (const auto& [name, f] : b->features) *out_bytes += f.values.size() * 4;
  }
  return src.stats().bytes;
}

// The hardware limit of the output side: `out_bytes` of float batches written with streaming
// stores (no read of the destination) into one recycled batch-sized buffer, the cheapest way to
// put that many bytes in memory. Returns seconds.
double StoreFloorPass(int64_t out_bytes, std::vector<float>& buffer) {
  auto a = Clock::now();
  const auto per_batch = static_cast<int64_t>(buffer.size());
  for (int64_t left = out_bytes / 4; left > 0; left -= per_batch)
    reel::tfrecord::FillZero(buffer.data(), static_cast<size_t>(std::min(left, per_batch)),
                             reel::tfrecord::StoreMode::kStreaming);
  reel::tfrecord::StoreFence();
  return Seconds(a, Clock::now());
}

// Everything but the batch: read, CRCs and wire decoding, no dequantization or output tensors.
int64_t DecodePass(reel::Storage& storage, const std::vector<std::string>& uris) {
  int64_t bytes = 0;
  std::string rec;
  reel::tfrecord::DecodeConfig config;
  config.features = reel::tfrecord::DefaultFeatureSpecs(reel::tfrecord::Level::kFrame);
  reel::tfrecord::VideoRecord video;
  for (const auto& uri : uris) {
    auto file = Check(storage.OpenRead(uri), "open");
    reel::recordio::RecordReader reader(file.get());
    Status s;
    while ((s = reader.ReadRecord(&rec)).ok()) {
      Check(reel::tfrecord::DecodeVideo(rec, config, &video), "decode");
      bytes += static_cast<int64_t>(rec.size() + 16);
    }
    if (s.code() != reel::StatusCode::kOutOfRange) Check(s, "decode pass");
  }
  return bytes;
}

int64_t CrcReaderPass(reel::Storage& storage, const std::vector<std::string>& uris) {
  int64_t bytes = 0;
  std::string rec;
  for (const auto& uri : uris) {
    auto file = Check(storage.OpenRead(uri), "open");
    reel::recordio::RecordReader reader(file.get());
    Status s;
    while ((s = reader.ReadRecord(&rec)).ok()) bytes += static_cast<int64_t>(rec.size() + 16);
    if (s.code() != reel::StatusCode::kOutOfRange) Check(s, "crc pass");
  }
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--dir")
      cfg.dir = next();
    else if (a == "--videos")
      cfg.videos = std::stoll(next());
    else if (a == "--reps")
      cfg.reps = std::stoi(next());
    else if (a == "--out")
      cfg.out = next();
    else if (a == "--keep")
      cfg.keep = true;
    else if (a == "--ingest-only")
      cfg.ingest_only = true;  // for profiling
    else {
      std::cerr << "usage: ingest_bench [--dir DIR] [--videos N] [--reps R] [--out DIR] [--keep] "
                   "[--ingest-only]\n";
      return 2;
    }
  }
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);

  reel::testing::LocalResolver resolver;
  reel::tfrecord::SynthOptions synth;
  synth.out = cfg.dir;
  synth.videos = cfg.videos;
  synth.classes = 3862;
  synth.shards = 4;
  synth.min_frames = 100;  // about 120 frames per video, as docs/benchmarks.md asks
  synth.max_frames = 140;
  std::filesystem::create_directories(cfg.dir);
  auto t0 = Clock::now();
  std::vector<std::string> uris;
  if (cfg.ingest_only && cfg.keep) {  // profiling: reuse the shards a previous --keep run left
    for (const auto& info : Check(resolver.storage().Glob(cfg.dir + "/train*.tfrecord"), "glob"))
      uris.push_back(info.uri);
  }
  if (uris.empty()) {
    uris = Check(reel::tfrecord::WriteSynthetic(resolver, synth), "synth");
    std::cerr << "wrote " << cfg.videos << " videos in " << Seconds(t0, Clock::now()) << " s\n";
  }

  // The same bytes in memory, for the crc32c and memcpy passes.
  std::string all;
  if (!cfg.ingest_only)
    for (const auto& uri : uris) all += Check(reel::ReadAll(resolver.storage(), uri), "read");
  std::vector<char> dst(all.size());
  const std::string pattern = cfg.dir + "/train*.tfrecord";

  auto options =
      Check(reel::ParseOptions(
                reel::tfrecord::TfRecordSourceSchema(),
                {{"files", pattern}, {"level", "frame"}, {"batch_size", "32"}, {"prefetch", "0"}}),
            "options");
  auto src = Check(reel::tfrecord::CreateTfRecordSource(options, {{0, 1}, 1, &resolver}), "source");
  std::vector<float> floor_buffer(32 * 140 * 1152);  // one batch of the longest videos

  std::map<std::string, std::vector<double>> rates;  // GB/s per pass
  int64_t videos = 0, frames = 0, out_bytes = 0;
  uint32_t sink = 0;
  for (int r = 0; r < cfg.reps; ++r) {
    auto a = Clock::now();
    int64_t bytes = IngestPass(*src, r, &videos, &frames, &out_bytes);
    auto b = Clock::now();
    if (!cfg.ingest_only && bytes != static_cast<int64_t>(all.size())) {
      std::cerr << "ingest read " << bytes << " bytes, files hold " << all.size() << "\n";
      return 1;
    }
    rates["ingest_frame"].push_back(bytes / Seconds(a, b) / 1e9);
    if (cfg.ingest_only) continue;
    rates["store_floor"].push_back(bytes / StoreFloorPass(out_bytes, floor_buffer) / 1e9);
    a = Clock::now();
    bytes = DecodePass(resolver.storage(), uris);
    b = Clock::now();
    rates["decode_only"].push_back(bytes / Seconds(a, b) / 1e9);
    a = Clock::now();
    bytes = CrcReaderPass(resolver.storage(), uris);
    b = Clock::now();
    rates["crc_reader"].push_back(bytes / Seconds(a, b) / 1e9);
    a = Clock::now();
    sink ^= reel::recordio::Crc32c(all.data(), all.size());
    b = Clock::now();
    rates["crc32c"].push_back(all.size() / Seconds(a, b) / 1e9);
    a = Clock::now();
    std::memcpy(dst.data(), all.data(), all.size());
    b = Clock::now();
    sink ^= static_cast<uint8_t>(dst[dst.size() / 2]);
    rates["memcpy"].push_back(all.size() / Seconds(a, b) / 1e9);
  }
  if (cfg.ingest_only) {
    std::cout << "ingest_frame median " << Median(rates["ingest_frame"]) << " GB/s\n";
    return 0;
  }
  std::map<std::string, double> med;
  for (auto& [k, v] : rates) med[k] = Median(v);
  const double per_video = static_cast<double>(frames) / static_cast<double>(videos);

  std::ostringstream json;
  json << "{\n  \"benchmark\": \"ingest_frame\",\n  \"command\": \"" << command << "\",\n"
       << "  \"input_bytes\": " << all.size() << ",\n  \"output_bytes\": " << out_bytes
       << ",\n  \"videos\": " << videos << ",\n  \"mean_frames_per_video\": " << per_video
       << ",\n  \"batch_size\": 32,\n"
       << "  \"crc32c_hardware\": "
       << (reel::recordio::Crc32cHardwareAvailable() ? "true" : "false")
       << ",\n  \"reps\": " << cfg.reps << ",\n  \"median_GBps\": {";
  bool first = true;
  for (auto& [k, v] : med) json << (first ? "" : ", ") << "\"" << k << "\": " << v, first = false;
  json << "},\n  \"ratios\": {\"ingest_over_crc_reader\": "
       << med["ingest_frame"] / med["crc_reader"]
       << ", \"decode_only_over_crc_reader\": " << med["decode_only"] / med["crc_reader"]
       << ", \"ingest_over_store_floor\": " << med["ingest_frame"] / med["store_floor"]
       << ", \"ingest_over_crc32c\": " << med["ingest_frame"] / med["crc32c"]
       << ", \"ingest_over_memcpy\": " << med["ingest_frame"] / med["memcpy"] << "}\n}\n";

  std::ostringstream md;
  md << "# ingest_frame\n\nCommand: `" << command << "`\n\n"
     << "Synthetic frame-level shards (rgb 1024 + audio 128 bytes per frame, " << per_video
     << " frames per video on average, " << videos << " videos, " << all.size() / 1e6
     << " MB in 4 files, page cache warm) turned into dequantized padded "
     << "batches of 32 on one core (prefetch 0), one epoch per repetition of one source (as "
        "training drives it). Median of "
     << cfg.reps << " alternating repetitions; rates are input bytes per second.\n\n"
     << "| pass | GB/s | ingest_frame / pass |\n|---|---|---|\n";
  for (const char* k :
       {"ingest_frame", "decode_only", "crc_reader", "store_floor", "crc32c", "memcpy"})
    md << "| " << k << " | " << med[k] << " | " << med["ingest_frame"] / med[k] << " |\n";
  md << "\n`decode_only`: the same reading, CRC checks and wire decoding as ingest_frame, without "
        "dequantizing into batches. `crc_reader`: RecordReader over the same files (read from "
        "storage + framing + both "
        "CRCs, no parsing). `store_floor`: the batches' "
     << out_bytes / 1e6 << " MB of float output ("
     << static_cast<double>(out_bytes) / static_cast<double>(all.size())
     << " bytes per input byte) written with streaming stores into one recycled buffer and "
        "nothing else, the memory-bandwidth limit of the output side, as input bytes per second. "
        "`crc32c`: the CRC instruction over the bytes in memory. `memcpy`: "
        "the bytes in memory copied once.\n";

  std::filesystem::create_directories(cfg.out);
  std::ofstream(cfg.out + "/ingest_frame.json") << json.str();
  std::ofstream(cfg.out + "/ingest_frame.md") << md.str();
  std::cout << md.str() << (sink == 42 ? " " : "") << "\n";
  if (!cfg.keep) std::filesystem::remove_all(cfg.dir);
  return 0;
}

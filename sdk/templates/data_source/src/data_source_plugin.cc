// A data source plugin: videos as lines of text files, "ID<TAB>LABEL LABEL...<TAB>V V V ...", one
// video-level feature ("feature" option: its name) per video. Copy it and replace the parsing
// with your format; the rules it follows are those of reel/data_source.h:
//   - files are read through ctx.storage, so s3:// or any scheme a plugin serves works;
//   - this rank reads every world_size-th video (rank, rank + world, ...): the ranks together read
//     each video exactly once per epoch;
//   - epoch e's order is a shuffle seeded by (seed, e), so a run is reproducible;
//   - Position() says where the stream is, in a form Restore() recognises and checks;
//   - errors name the file and line.
#include <algorithm>
#include <memory>
#include <random>
#include <sstream>

#include "reel/plugin.h"

namespace {

struct Video {
  std::string id;
  std::vector<int32_t> labels;
  std::vector<float> values;
};

reel::Result<std::vector<Video>> ReadVideos(reel::StorageResolver& storage,
                                            const std::vector<std::string>& patterns, int64_t width,
                                            int64_t classes) {
  std::vector<Video> videos;
  for (const std::string& pattern : patterns) {
    REEL_ASSIGN_OR_RETURN(reel::Storage * s, storage.ForUri(pattern));
    REEL_ASSIGN_OR_RETURN(auto files, s->Glob(pattern));
    if (files.empty()) return reel::NotFoundError("no file matches '" + pattern + "'");
    for (const reel::ObjectInfo& file : files) {
      REEL_ASSIGN_OR_RETURN(std::string text, reel::ReadAll(*s, file.uri));
      std::istringstream lines(text);
      std::string line;
      for (int number = 1; std::getline(lines, line); ++number) {
        const std::string where = file.uri + ":" + std::to_string(number);
        std::istringstream fields(line);
        std::string labels, values;
        Video v;
        if (!std::getline(fields, v.id, '\t') || !std::getline(fields, labels, '\t') ||
            !std::getline(fields, values))
          return reel::DataLossError(where + ": want ID<TAB>LABELS<TAB>VALUES");
        std::istringstream l(labels), x(values);
        for (int32_t c; l >> c;) {
          if (c < 0 || c >= classes)
            return reel::DataLossError(where + ": label " + std::to_string(c) + " outside [0, " +
                                       std::to_string(classes) + ")");
          v.labels.push_back(c);
        }
        for (float f; x >> f;) v.values.push_back(f);
        if (static_cast<int64_t>(v.values.size()) != width)
          return reel::DataLossError(where + ": " + std::to_string(v.values.size()) +
                                     " values, want " + std::to_string(width));
        videos.push_back(std::move(v));
      }
    }
  }
  return videos;
}

class TextVideos final : public reel::DataSource {
 public:
  TextVideos(std::vector<Video> videos, std::string feature, int64_t width, int64_t batch_size,
             const reel::DataSourceContext& ctx)
      : videos_(std::move(videos)),
        feature_(std::move(feature)),
        width_(width),
        batch_size_(batch_size),
        ctx_(ctx) {
    (void)StartEpoch(0);
  }

  reel::Result<reel::Batch> Next() override {
    if (next_ >= order_.size())
      return reel::OutOfRangeError("end of epoch " + std::to_string(epoch_));
    const size_t n = std::min<size_t>(static_cast<size_t>(batch_size_), order_.size() - next_);
    reel::Batch batch;
    reel::Feature f{reel::Tensor({static_cast<int64_t>(n), 1, width_}), std::vector<int32_t>(n, 1)};
    for (size_t b = 0; b < n; ++b) {
      const Video& v = videos_[order_[next_++]];
      batch.ids.push_back(v.id);
      batch.label_ids.insert(batch.label_ids.end(), v.labels.begin(), v.labels.end());
      batch.label_offsets.push_back(static_cast<int64_t>(batch.label_ids.size()));
      std::copy(v.values.begin(), v.values.end(), f.values.data() + b * width_);
    }
    batch.features.emplace(feature_, std::move(f));
    return batch;
  }

  reel::Status StartEpoch(int64_t epoch) override {
    epoch_ = epoch;
    next_ = 0;
    order_.clear();
    for (size_t i = static_cast<size_t>(ctx_.shard.rank); i < videos_.size();
         i += static_cast<size_t>(ctx_.shard.world_size))
      order_.push_back(i);
    std::mt19937_64 rng(ctx_.seed * 1000003 + static_cast<uint64_t>(epoch));
    std::shuffle(order_.begin(), order_.end(), rng);
    return reel::Status::Ok();
  }

  reel::Result<std::string> Position() const override {
    return "text_videos/1 " + std::to_string(epoch_) + " " + std::to_string(next_);
  }

  reel::Status Restore(std::string_view position) override {
    std::istringstream in{std::string(position)};
    std::string magic;
    int64_t epoch = -1;
    size_t next = 0;
    if (!(in >> magic >> epoch >> next) || magic != "text_videos/1" || epoch < 0)
      return reel::InvalidArgumentError("not a text_videos position: '" + std::string(position) +
                                        "'");
    REEL_RETURN_IF_ERROR(StartEpoch(epoch));
    if (next > order_.size())
      return reel::InvalidArgumentError("position " + std::to_string(next) +
                                        " is past this shard's " + std::to_string(order_.size()) +
                                        " videos");
    next_ = next;
    return reel::Status::Ok();
  }

 private:
  std::vector<Video> videos_;
  std::string feature_;
  int64_t width_, batch_size_;
  reel::DataSourceContext ctx_;
  int64_t epoch_ = 0;
  std::vector<size_t> order_;  // this shard's videos in this epoch's order
  size_t next_ = 0;
};

reel::Status Register(reel::Registrar& r) {
  reel::OptionSchema options = {
      reel::Required(reel::StringListOption("files", "", "file patterns, e.g. data/*.txt")),
      reel::StringOption("feature", "mean_rgb", "name of the feature the values become"),
      reel::IntOption("width", 4, "values per video"),
      reel::IntOption("num_classes", 3862, "labels must lie in [0, num_classes)"),
      reel::IntOption("batch_size", 32, "videos per batch")};
  return r.Add<reel::DataSource>(
      {"text_videos", "videos as lines of text: ID, labels, values", options},
      [](const reel::Options& o,
         const reel::DataSourceContext& ctx) -> reel::Result<std::unique_ptr<reel::DataSource>> {
        if (ctx.storage == nullptr) return reel::InvalidArgumentError("needs a storage resolver");
        if (o.GetInt("batch_size") < 1 || o.GetInt("width") < 1)
          return reel::InvalidArgumentError("options 'batch_size' and 'width' must be >= 1");
        REEL_ASSIGN_OR_RETURN(auto videos, ReadVideos(*ctx.storage, o.GetStringList("files"),
                                                      o.GetInt("width"), o.GetInt("num_classes")));
        return std::unique_ptr<reel::DataSource>(
            new TextVideos(std::move(videos), o.GetString("feature"), o.GetInt("width"),
                           o.GetInt("batch_size"), ctx));
      });
}

}  // namespace

REEL_PLUGIN("template_data_source", "0.1.0", "Template data source plugin: copy me", Register)

#include "array_source.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <variant>

#include "reel/plugin.h"

namespace reel::python {
namespace {

using Entry = std::variant<std::shared_ptr<const ArrayTable>, std::shared_ptr<const BatchStream>>;

std::mutex g_tables_mu;
std::map<int64_t, Entry> g_tables;  // guarded by g_tables_mu
int64_t g_next = 1;                 // guarded by g_tables_mu

std::string RowId(const ArrayTable& t, int64_t row) {
  return t.ids.empty() ? "r" + std::to_string(row) : t.ids[static_cast<size_t>(row)];
}

struct Framing {
  int64_t max_frames = 300;
  bool fixed_length = false;
  int64_t num_classes = 3862;
};

// The videos `rows` of `t` as one batch, padded as the tfrecord source pads (README there).
Result<Batch> MakeBatch(const ArrayTable& t, const std::vector<int64_t>& rows, const Framing& f) {
  Batch b;
  const auto n = static_cast<int64_t>(rows.size());
  for (int64_t row : rows) {
    b.ids.push_back(RowId(t, row));
    for (int64_t k = t.label_offsets[row]; k < t.label_offsets[row + 1]; ++k) {
      const int32_t c = t.label_ids[static_cast<size_t>(k)];
      if (c >= f.num_classes)
        return InvalidArgumentError("labels: video " + std::to_string(row) + " has label " +
                                    std::to_string(c) + " outside [0, " +
                                    std::to_string(f.num_classes) + ")");
      b.label_ids.push_back(c);
    }
    b.label_offsets.push_back(static_cast<int64_t>(b.label_ids.size()));
  }
  for (const ArrayFeature& a : t.features) {
    Feature out;
    int64_t frames = 1;
    for (int64_t row : rows) {
      const int64_t len = std::min<int64_t>(a.lengths[static_cast<size_t>(row)], f.max_frames);
      out.lengths.push_back(static_cast<int32_t>(len));
      frames = std::max(frames, len);
    }
    if (f.fixed_length) frames = std::max<int64_t>(f.max_frames, 1);
    out.values = Tensor::Uninitialized({n, frames, a.width});
    float* dst = out.values.data();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t len = out.lengths[static_cast<size_t>(i)];
      const float* src = a.frames[static_cast<size_t>(rows[static_cast<size_t>(i)])];
      float* video = dst + i * frames * a.width;
      std::memcpy(video, src, static_cast<size_t>(len * a.width) * sizeof(float));
      std::fill(video + len * a.width, video + frames * a.width, 0.0f);
    }
    b.features.emplace(a.name, std::move(out));
  }
  return b;
}

// A position: "numpy/v2 WHAT epoch=E next=N", WHAT "videos=R" for a table of R videos (a table
// of as many videos takes it: a resumed call registers its arrays under a new handle) or
// "stream".
std::string PositionText(const std::string& what, int64_t epoch, int64_t next) {
  return "numpy/v2 " + what + " epoch=" + std::to_string(epoch) + " next=" + std::to_string(next);
}

bool ParseField(const std::string& word, std::string_view key, int64_t& value) {
  if (word.size() <= key.size() || word.compare(0, key.size(), key) != 0) return false;
  const char* end = word.data() + word.size();
  auto [ptr, ec] = std::from_chars(word.data() + key.size(), end, value);
  return ec == std::errc() && ptr == end && value >= 0;
}

Status ParsePosition(std::string_view position, const std::string& what, int64_t& epoch,
                     int64_t& next) {
  std::istringstream in{std::string(position)};
  std::string tag, w, e, n, rest;
  if (!(in >> tag >> w >> e >> n) || (in >> rest) || tag != "numpy/v2" || w != what ||
      !ParseField(e, "epoch=", epoch) || !ParseField(n, "next=", next))
    return InvalidArgumentError("not a position of this in-memory data (" + what + "): '" +
                                std::string(position) + "'");
  return Status::Ok();
}

class TableSource : public DataSource {
 public:
  TableSource(std::shared_ptr<const ArrayTable> t, int64_t batch, bool shuffle, Framing framing,
              uint64_t seed, ShardSpec shard)
      : t_(std::move(t)),
        batch_(batch),
        shuffle_(shuffle),
        framing_(framing),
        seed_(seed),
        shard_(shard) {
    Order();
  }

  Result<Batch> Next() override {
    if (next_ >= static_cast<int64_t>(order_.size())) return OutOfRangeError("end of epoch");
    const int64_t n = std::min<int64_t>(batch_, static_cast<int64_t>(order_.size()) - next_);
    std::vector<int64_t> rows(order_.begin() + next_, order_.begin() + next_ + n);
    REEL_ASSIGN_OR_RETURN(Batch b, MakeBatch(*t_, rows, framing_));
    next_ += n;
    return b;
  }

  Status StartEpoch(int64_t epoch) override {
    epoch_ = epoch;
    next_ = 0;
    Order();
    return Status::Ok();
  }

  Result<std::string> Position() const override {
    return PositionText("videos=" + std::to_string(t_->rows), epoch_, next_);
  }

  Status Restore(std::string_view position) override {
    int64_t epoch = 0, next = 0;
    REEL_RETURN_IF_ERROR(
        ParsePosition(position, "videos=" + std::to_string(t_->rows), epoch, next));
    REEL_RETURN_IF_ERROR(StartEpoch(epoch));
    next_ = std::min<int64_t>(next, static_cast<int64_t>(order_.size()));
    return Status::Ok();
  }

 private:
  void Order() {
    order_.clear();
    for (int64_t r = 0; r < t_->rows; ++r)
      if (r % shard_.world_size == shard_.rank) order_.push_back(r);
    if (shuffle_) {
      std::mt19937_64 rng(seed_ * 1000003u + static_cast<uint64_t>(epoch_));
      std::shuffle(order_.begin(), order_.end(), rng);
    }
  }

  std::shared_ptr<const ArrayTable> t_;
  int64_t batch_;
  bool shuffle_;
  Framing framing_;
  uint64_t seed_;
  ShardSpec shard_;
  std::vector<int64_t> order_;
  int64_t epoch_ = 0, next_ = 0;
};

// Batches as the stream gives them (their size is the caller's; batch_size and shuffle do not
// apply), each checked as a table.
class StreamSource : public DataSource {
 public:
  StreamSource(std::shared_ptr<const BatchStream> s, Framing framing)
      : s_(std::move(s)), framing_(framing) {}

  Result<Batch> Next() override {
    Result<ArrayTable> t = (*s_)(epoch_, next_);
    if (!t.ok()) return t.status();
    REEL_RETURN_IF_ERROR(ValidateArrayTable(*t).WithContext("batch " + std::to_string(next_)));
    std::vector<int64_t> rows(static_cast<size_t>(t->rows));
    for (int64_t r = 0; r < t->rows; ++r) rows[static_cast<size_t>(r)] = r;
    REEL_ASSIGN_OR_RETURN(Batch b, MakeBatch(*t, rows, framing_));
    ++next_;
    return b;
  }

  Status StartEpoch(int64_t epoch) override {
    epoch_ = epoch;
    next_ = 0;
    return Status::Ok();
  }

  Result<std::string> Position() const override { return PositionText("stream", epoch_, next_); }

  Status Restore(std::string_view position) override {
    int64_t epoch = 0, next = 0;
    REEL_RETURN_IF_ERROR(ParsePosition(position, "stream", epoch, next));
    epoch_ = epoch;
    next_ = next;
    return Status::Ok();
  }

 private:
  std::shared_ptr<const BatchStream> s_;
  Framing framing_;
  int64_t epoch_ = 0, next_ = 0;
};

Status Register(Registrar& r) noexcept {
  return r.Add<DataSource>(
      {"numpy",
       "features and labels in this Python process (reel.train's data=, reel.sklearn)",
       {IntOption("table", 0, "handle of the arrays"),
        IntOption("batch_size", 32, "videos a batch"),
        BoolOption("shuffle", true, "permute every epoch from the seed"),
        IntOption("max_frames", 300, "longer videos are truncated"),
        BoolOption("fixed_length", false, "pad to max_frames instead of the batch's longest"),
        IntOption("num_classes", 3862, "labels lie in [0, num_classes)")}},
      [](const Options& o, const DataSourceContext& ctx) -> Result<std::unique_ptr<DataSource>> {
        const int64_t handle = o.GetInt("table");
        Entry e;
        {
          std::lock_guard<std::mutex> lock(g_tables_mu);
          auto it = g_tables.find(handle);
          if (it == g_tables.end())
            return NotFoundError("no numpy table " + std::to_string(handle));
          e = it->second;
        }
        if (o.GetInt("batch_size") < 1) return InvalidArgumentError("batch_size must be >= 1");
        if (o.GetInt("max_frames") < 1) return InvalidArgumentError("max_frames must be >= 1");
        Framing f{o.GetInt("max_frames"), o.GetBool("fixed_length"), o.GetInt("num_classes")};
        if (auto* s = std::get_if<std::shared_ptr<const BatchStream>>(&e)) {
          if (ctx.shard.world_size > 1)
            return UnimplementedError("an iterable of batches feeds one rank; give arrays to " +
                                      std::to_string(ctx.shard.world_size) + " ranks");
          return std::unique_ptr<DataSource>(new StreamSource(*s, f));
        }
        return std::unique_ptr<DataSource>(
            new TableSource(std::get<std::shared_ptr<const ArrayTable>>(e), o.GetInt("batch_size"),
                            o.GetBool("shuffle"), f, ctx.seed, ctx.shard));
      });
}

int64_t Add(Entry e) {
  std::lock_guard<std::mutex> lock(g_tables_mu);
  g_tables[g_next] = std::move(e);
  return g_next++;
}

}  // namespace

Status ValidateArrayTable(const ArrayTable& t) {
  const auto rows = static_cast<size_t>(t.rows);
  if (t.rows < 0 || t.label_offsets.size() != rows + 1 || t.label_offsets[0] != 0 ||
      t.label_offsets.back() != static_cast<int64_t>(t.label_ids.size()))
    return InvalidArgumentError("labels: offsets do not match " + std::to_string(t.rows) +
                                " videos and " + std::to_string(t.label_ids.size()) + " labels");
  for (size_t r = 0; r < rows; ++r) {
    if (t.label_offsets[r + 1] < t.label_offsets[r])
      return InvalidArgumentError("labels: offsets decrease at video " + std::to_string(r));
    for (int64_t k = t.label_offsets[r]; k < t.label_offsets[r + 1]; ++k)
      if (t.label_ids[static_cast<size_t>(k)] < 0)
        return InvalidArgumentError("labels: video " + std::to_string(r) + " has label " +
                                    std::to_string(t.label_ids[static_cast<size_t>(k)]));
  }
  if (!t.ids.empty() && t.ids.size() != rows)
    return InvalidArgumentError("id: " + std::to_string(t.ids.size()) + " ids for " +
                                std::to_string(t.rows) + " videos");
  if (t.features.empty()) return InvalidArgumentError("no feature");
  for (const ArrayFeature& a : t.features) {
    if (a.frames.size() != rows || a.lengths.size() != rows)
      return InvalidArgumentError("feature '" + a.name + "': " + std::to_string(a.lengths.size()) +
                                  " videos, want " + std::to_string(t.rows));
    if (a.width < 1) return InvalidArgumentError("feature '" + a.name + "': width 0");
    for (size_t r = 0; r < rows; ++r)
      if (a.lengths[r] < 1 || a.frames[r] == nullptr)
        return InvalidArgumentError("feature '" + a.name + "': video " + std::to_string(r) +
                                    " has no frame");
  }
  return Status::Ok();
}

int64_t AddArrayTable(ArrayTable table) {
  return Add(std::make_shared<const ArrayTable>(std::move(table)));
}

int64_t AddArrayStream(BatchStream stream) {
  return Add(std::make_shared<const BatchStream>(std::move(stream)));
}

void DropArrayTable(int64_t handle) {
  Entry gone;  // released after the lock: its arrays' owner may take the GIL
  std::lock_guard<std::mutex> lock(g_tables_mu);
  auto it = g_tables.find(handle);
  if (it == g_tables.end()) return;
  gone = std::move(it->second);
  g_tables.erase(it);
}

int64_t ArrayTableCount() {
  std::lock_guard<std::mutex> lock(g_tables_mu);
  return static_cast<int64_t>(g_tables.size());
}

Status RegisterArraySource(core::Registry& registry) {
  return registry.RegisterFrom("python", "", nullptr, &Register);
}

}  // namespace reel::python

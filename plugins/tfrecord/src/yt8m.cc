// Wire-level decoding of YouTube-8M Example/SequenceExample payloads (see yt8m.h).
#include "yt8m.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <array>
#include <climits>
#include <cmath>
#include <cstring>

namespace reel::tfrecord {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

constexpr int kVarint = 0, kLengthDelimited = 2, kFixed32 = 5;

// A forward reader of one message's fields, handing out length-delimited fields as views.
class Wire {
 public:
  explicit Wire(std::string_view s)
      : size_(static_cast<int>(s.size())),
        in_(reinterpret_cast<const uint8_t*>(s.data()), static_cast<int>(s.size())),
        base_(s.data()) {}

  // The next field, or false at the end (or on malformed data: check ok()).
  bool Next() {
    tag_ = in_.ReadTag();
    if (tag_ == 0) {
      bad_ = bad_ || in_.CurrentPosition() != size_;
      return false;
    }
    return true;
  }
  int field() const { return static_cast<int>(tag_ >> 3); }
  int wire_type() const { return static_cast<int>(tag_ & 7); }
  bool ok() const { return !bad_; }

  // The contents of the current length-delimited field.
  bool View(std::string_view* out) {
    uint32_t len;
    if (!in_.ReadVarint32(&len)) return Bad();
    int pos = in_.CurrentPosition();
    if (len > static_cast<uint32_t>(size_ - pos)) return Bad();
    *out = std::string_view(base_ + pos, len);
    return in_.Skip(static_cast<int>(len)) || Bad();
  }
  bool Skip() { return WireFormatLite::SkipField(&in_, tag_) || Bad(); }
  bool Varint(uint64_t* v) { return in_.ReadVarint64(v) || Bad(); }
  bool Fixed32(uint32_t* v) { return in_.ReadLittleEndian32(v) || Bad(); }

 private:
  bool Bad() {
    bad_ = true;
    return false;
  }
  int size_;
  CodedInputStream in_;
  const char* base_;
  uint32_t tag_ = 0;
  bool bad_ = false;
};

Status Unparsable(std::string_view what) {
  return DataLossError("unparsable Example/SequenceExample payload: " + std::string(what));
}

// A map entry {key = 1; value = 2}.
bool MapEntry(std::string_view entry, std::string_view* key, std::string_view* value) {
  Wire w(entry);
  *key = {};
  *value = {};
  while (w.Next()) {
    if (w.field() == 1 && w.wire_type() == kLengthDelimited) {
      if (!w.View(key)) return false;
    } else if (w.field() == 2 && w.wire_type() == kLengthDelimited) {
      if (!w.View(value)) return false;
    } else if (!w.Skip()) {
      return false;
    }
  }
  return w.ok();
}

// Calls fn(key, value) for each entry of a map<string, ...> serialized as field 1 of `msg`.
template <typename Fn>
bool ForEachEntry(std::string_view msg, Fn fn) {
  Wire w(msg);
  while (w.Next()) {
    if (w.field() == 1 && w.wire_type() == kLengthDelimited) {
      std::string_view entry, key, value;
      if (!w.View(&entry) || !MapEntry(entry, &key, &value)) return false;
      fn(key, value);
    } else if (!w.Skip()) {
      return false;
    }
  }
  return w.ok();
}

// The list inside a Feature: its kind (1 bytes, 2 float, 3 int64; 0 none) and contents.
bool FeatureKind(std::string_view feature, int* kind, std::string_view* list) {
  Wire w(feature);
  *kind = 0;
  *list = {};
  while (w.Next()) {
    if (w.field() >= 1 && w.field() <= 3 && w.wire_type() == kLengthDelimited) {
      *kind = w.field();
      if (!w.View(list)) return false;
    } else if (!w.Skip()) {
      return false;
    }
  }
  return w.ok();
}

// Calls fn(view) for each value of a BytesList.
template <typename Fn>
bool ForEachBytes(std::string_view list, Fn fn) {
  Wire w(list);
  while (w.Next()) {
    if (w.field() == 1 && w.wire_type() == kLengthDelimited) {
      std::string_view v;
      if (!w.View(&v)) return false;
      if (!fn(v)) return true;
    } else if (!w.Skip()) {
      return false;
    }
  }
  return w.ok();
}

bool Int64s(std::string_view list, std::vector<int64_t>* out) {
  Wire w(list);
  while (w.Next()) {
    if (w.field() == 1 && w.wire_type() == kLengthDelimited) {
      std::string_view packed;
      if (!w.View(&packed)) return false;
      CodedInputStream in(reinterpret_cast<const uint8_t*>(packed.data()),
                          static_cast<int>(packed.size()));
      while (in.CurrentPosition() < static_cast<int>(packed.size())) {
        uint64_t v;
        if (!in.ReadVarint64(&v)) return false;
        out->push_back(static_cast<int64_t>(v));
      }
    } else if (w.field() == 1 && w.wire_type() == kVarint) {
      uint64_t v;
      if (!w.Varint(&v)) return false;
      out->push_back(static_cast<int64_t>(v));
    } else if (!w.Skip()) {
      return false;
    }
  }
  return w.ok();
}

// The index of the first NaN or infinite float of the `n` at `p` (little-endian, maybe
// unaligned), or -1. The common case is one pass that ORs a test of every float's exponent bits,
// which the compiler vectorises; only a record that fails it is searched again.
int64_t FirstNonFinite(const char* p, size_t n) {
  constexpr uint32_t kExponent = 0x7f800000u;  // all ones: inf or NaN
  auto bad = [&](size_t i) {
    uint32_t bits;
    std::memcpy(&bits, p + i * 4, 4);
    return static_cast<uint32_t>((bits & kExponent) == kExponent);
  };
  // Blocks of 8: gcc's -O2 cost model vectorises this loop, not the plain one (-fopt-info-vec).
  uint32_t any = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint32_t block = 0;
    for (size_t j = 0; j < 8; ++j) block |= bad(i + j);
    any |= block;
  }
  for (; i < n; ++i) any |= bad(i);
  if (any == 0) return -1;
  for (i = 0; i < n; ++i)
    if (bad(i)) return static_cast<int64_t>(i);
  return -1;
}

// A FloatList: sets *packed (when one packed run holds everything) or appends to *unpacked.
bool Floats(std::string_view list, std::string_view* packed, std::vector<float>* unpacked) {
  Wire w(list);
  int runs = 0;
  while (w.Next()) {
    if (w.field() == 1 && w.wire_type() == kLengthDelimited) {
      std::string_view run;
      if (!w.View(&run) || run.size() % 4 != 0) return false;
      // An empty run adds nothing; copying it would pass memcpy the null data() of an empty
      // vector (undefined behaviour, found by the yt8m_decode fuzzer).
      if (run.empty()) continue;
      if (++runs == 1 && unpacked->empty()) {
        *packed = run;
        continue;
      }
      if (!packed->empty()) {  // several runs: gather everything
        size_t n = unpacked->size();
        unpacked->resize(n + packed->size() / 4);
        std::memcpy(unpacked->data() + n, packed->data(), packed->size());
        *packed = {};
      }
      size_t n = unpacked->size();
      unpacked->resize(n + run.size() / 4);
      std::memcpy(unpacked->data() + n, run.data(), run.size());
    } else if (w.field() == 1 && w.wire_type() == kFixed32) {
      uint32_t bits;
      if (!w.Fixed32(&bits)) return false;
      if (!packed->empty()) {
        unpacked->resize(packed->size() / 4);
        std::memcpy(unpacked->data(), packed->data(), packed->size());
        *packed = {};
      }
      float f;
      std::memcpy(&f, &bits, 4);
      unpacked->push_back(f);
    } else if (!w.Skip()) {
      return false;
    }
  }
  return w.ok();
}

std::string Quote(std::string_view s) { return "'" + std::string(s) + "'"; }

// Reads a varint of at most 5 bytes at p (< end); nullptr if malformed.
const char* Varint32(const char* p, const char* end, uint32_t* v) {
  uint32_t result = 0;
  for (int shift = 0; shift < 35 && p < end; shift += 7) {
    auto b = static_cast<uint8_t>(*p++);
    result |= static_cast<uint32_t>(b & 0x7f) << shift;
    if (b < 0x80) {
      *v = result;
      return p;
    }
  }
  return nullptr;
}

// The common frame encoding, Feature{bytes_list = 1: BytesList{value = 1: <bytes>}} with nothing
// else, recognised without a CodedInputStream (two of them per frame dominate decoding otherwise).
// False when the feature is anything else; the general path then decides.
bool SimpleBytesFrame(std::string_view feature, std::string_view* frame) {
  const char* p = feature.data();
  const char* end = p + feature.size();
  uint32_t len;
  if (p == end || *p != 0x0a || (p = Varint32(p + 1, end, &len)) == nullptr ||
      len != static_cast<size_t>(end - p))
    return false;
  if (p == end || *p != 0x0a || (p = Varint32(p + 1, end, &len)) == nullptr ||
      len != static_cast<size_t>(end - p))
    return false;
  *frame = std::string_view(p, len);
  return true;
}

// The common case in one tight loop: every entry of the list is field 1 holding a simple bytes
// frame of exactly `dim` bytes. False at anything else (or no frames), with *fv as it was; the
// general loop then decodes the list or says what is wrong with it.
bool DecodeSimpleFrames(std::string_view list, const FeatureSpec& spec, int64_t max_frames,
                        FeatureView* fv) {
  const char* p = list.data();
  const char* const end = p + list.size();
  const size_t kept = fv->frames.size();
  int64_t total = fv->total_frames;
  while (p < end) {
    uint32_t len = 0;
    const char* q = *p == 0x0a ? Varint32(p + 1, end, &len) : nullptr;
    std::string_view frame;
    if (q == nullptr || len > static_cast<size_t>(end - q) ||
        !SimpleBytesFrame(std::string_view(q, len), &frame) ||
        static_cast<int64_t>(frame.size()) != spec.dim) {
      fv->frames.resize(kept);
      return false;
    }
    if (total < max_frames) fv->frames.push_back(reinterpret_cast<const uint8_t*>(frame.data()));
    ++total;
    p = q + len;
  }
  if (total == fv->total_frames) return false;
  fv->total_frames = total;
  return true;
}

// Frames of a FeatureList (repeated Feature = 1), each a BytesList with one value of `dim` bytes.
Status DecodeFrames(std::string_view list, const FeatureSpec& spec, int64_t max_frames,
                    std::string_view id, FeatureView* fv) {
  if (DecodeSimpleFrames(list, spec, max_frames, fv)) return Status::Ok();
  Wire w(list);
  while (w.Next()) {
    if (w.field() != 1 || w.wire_type() != kLengthDelimited) {
      if (!w.Skip()) break;
      continue;
    }
    std::string_view feature, bytes_list, frame;
    int kind;
    if (!w.View(&feature))
      return Unparsable("video " + Quote(id) + ": feature list " + Quote(spec.name));
    if (SimpleBytesFrame(feature, &frame) && static_cast<int64_t>(frame.size()) == spec.dim) {
      if (fv->total_frames < max_frames)
        fv->frames.push_back(reinterpret_cast<const uint8_t*>(frame.data()));
      ++fv->total_frames;
      continue;
    }
    if (!FeatureKind(feature, &kind, &bytes_list))
      return Unparsable("video " + Quote(id) + ": feature list " + Quote(spec.name));
    if (kind != 1)
      return DataLossError("video " + Quote(id) + ": feature " + Quote(spec.name) + " frame " +
                           std::to_string(fv->total_frames) + " is not a bytes list");
    int values = 0;
    if (!ForEachBytes(bytes_list, [&](std::string_view v) {
          if (values++ == 0) frame = v;
          return true;
        }))
      return Unparsable("video " + Quote(id) + ": feature list " + Quote(spec.name));
    if (values != 1 || static_cast<int64_t>(frame.size()) != spec.dim)
      return DataLossError("video " + Quote(id) + ": feature " + Quote(spec.name) + " frame " +
                           std::to_string(fv->total_frames) + " has " +
                           (values == 1 ? std::to_string(frame.size()) + " bytes"
                                        : std::to_string(values) + " values") +
                           ", want one value of " + std::to_string(spec.dim) + " bytes");
    if (fv->total_frames < max_frames)
      fv->frames.push_back(reinterpret_cast<const uint8_t*>(frame.data()));
    ++fv->total_frames;
  }
  if (!w.ok()) return Unparsable("video " + Quote(id) + ": feature list " + Quote(spec.name));
  if (fv->total_frames == 0)
    return DataLossError("video " + Quote(id) + ": feature " + Quote(spec.name) + " has no frames");
  return Status::Ok();
}

Status DecodeVideoFeature(std::string_view feature, const FeatureSpec& spec, std::string_view id,
                          FeatureView* fv) {
  int kind;
  std::string_view list, packed;
  if (!FeatureKind(feature, &kind, &list))
    return Unparsable("video " + Quote(id) + ": feature " + Quote(spec.name));
  if (kind != 2)
    return DataLossError("video " + Quote(id) + ": feature " + Quote(spec.name) +
                         " is not a float list");
  if (!Floats(list, &packed, &fv->unpacked))
    return Unparsable("video " + Quote(id) + ": feature " + Quote(spec.name));
  size_t n = packed.empty() ? fv->unpacked.size() : packed.size() / 4;
  if (static_cast<int64_t>(n) != spec.dim)
    return DataLossError("video " + Quote(id) + ": feature " + Quote(spec.name) + " has " +
                         std::to_string(n) + " floats, want " + std::to_string(spec.dim));
  const char* floats =
      packed.empty() ? reinterpret_cast<const char*>(fv->unpacked.data()) : packed.data();
  if (const int64_t bad = FirstNonFinite(floats, n); bad >= 0) {
    float v;
    std::memcpy(&v, floats + bad * 4, 4);
    return DataLossError("video " + Quote(id) + ": feature " + Quote(spec.name) + " value " +
                         std::to_string(bad) + " is " + (std::isnan(v) ? "NaN" : "infinite") +
                         "; features must be finite");
  }
  fv->packed_floats = packed.empty() ? nullptr : packed.data();
  return Status::Ok();
}

struct Scan {
  std::string_view id_feature, labels_feature;
  bool has_id = false, has_labels = false;
  std::array<std::string_view, 16> raw{};  // per wanted feature (at most 16)
  std::array<bool, 16> found{};
};

}  // namespace

int32_t VideoRecord::length(size_t i) const {
  const FeatureView& f = features[i];
  return f.packed_floats || !f.unpacked.empty() ? 1 : static_cast<int32_t>(f.frames.size());
}

Status DecodeVideo(std::string_view payload, const DecodeConfig& config, VideoRecord* out) {
  const size_t n = config.features.size();
  if (n > Scan{}.raw.size()) return InvalidArgumentError("at most 16 features per record");
  if (payload.size() > INT_MAX) return Unparsable("payload larger than 2 GiB");
  out->id = {};
  out->labels.clear();
  out->features.resize(n);
  for (auto& f : out->features) {
    f.frames.clear();
    f.total_frames = 0;
    f.packed_floats = nullptr;
    f.unpacked.clear();
  }
  Scan scan;
  const bool frame = config.level == Level::kFrame;
  auto on_feature = [&](std::string_view key, std::string_view value, bool list) {
    if (!list && key == config.id_key) {
      scan.id_feature = value;
      scan.has_id = true;
    } else if (!list && key == config.labels_key) {
      scan.labels_feature = value;
      scan.has_labels = true;
    } else if (list == frame) {
      for (size_t i = 0; i < n; ++i)
        if (key == config.features[i].name) {
          scan.raw[i] = value;
          scan.found[i] = true;
        }
    }
  };
  Wire top(payload);
  while (top.Next()) {
    std::string_view msg;
    if ((top.field() == 1 || top.field() == 2) && top.wire_type() == kLengthDelimited) {
      if (!top.View(&msg)) break;
      bool list = top.field() == 2;
      if (!ForEachEntry(msg,
                        [&](std::string_view k, std::string_view v) { on_feature(k, v, list); }))
        return Unparsable(list ? "feature_lists" : "features");
    } else if (!top.Skip()) {
      break;
    }
  }
  if (!top.ok()) return Unparsable("top-level message");

  if (!scan.has_id)
    return DataLossError("record has no feature " + Quote(config.id_key) + " (option id_key)");
  int kind;
  std::string_view list;
  if (!FeatureKind(scan.id_feature, &kind, &list) || kind != 1 ||
      !ForEachBytes(list, [&](std::string_view v) {
        out->id = v;
        return false;
      }))
    return DataLossError("record's " + Quote(config.id_key) + " feature is not a bytes list");

  if (scan.has_labels) {
    thread_local std::vector<int64_t> labels;
    labels.clear();
    if (!FeatureKind(scan.labels_feature, &kind, &list) || (kind != 3 && kind != 0) ||
        !Int64s(list, &labels))
      return DataLossError("video " + Quote(out->id) + ": feature " + Quote(config.labels_key) +
                           " is not an int64 list");
    for (int64_t c : labels) {
      if (c < 0 || c >= config.num_classes)
        return InvalidArgumentError("video " + Quote(out->id) + " has label " + std::to_string(c) +
                                    " outside [0, " + std::to_string(config.num_classes) +
                                    ") (check option num_classes)");
      out->labels.push_back(static_cast<int32_t>(c));
    }
  }

  for (size_t i = 0; i < n; ++i) {
    const FeatureSpec& spec = config.features[i];
    if (!scan.found[i])
      return DataLossError("video " + Quote(out->id) + " has no " +
                           (frame ? "feature list " : "feature ") + Quote(spec.name));
    REEL_RETURN_IF_ERROR(
        frame ? DecodeFrames(scan.raw[i], spec, config.max_frames, out->id, &out->features[i])
              : DecodeVideoFeature(scan.raw[i], spec, out->id, &out->features[i]));
  }
  return Status::Ok();
}

void WriteFeature(const VideoRecord& rec, size_t i, int64_t dim, Level level, float* dst,
                  StoreMode mode) {
  const FeatureView& f = rec.features[i];
  if (level == Level::kVideo) {
    const void* src = f.packed_floats ? static_cast<const void*>(f.packed_floats)
                                      : static_cast<const void*>(f.unpacked.data());
    std::memcpy(dst, src, static_cast<size_t>(dim) * sizeof(float));
    return;
  }
  for (size_t t = 0; t < f.frames.size(); ++t)
    DequantizeBytes(f.frames[t], static_cast<size_t>(dim), dst + t * static_cast<size_t>(dim),
                    mode);
}

// ---- Feature specs ----

Result<std::vector<FeatureSpec>> ParseFeatureSpecs(const std::vector<std::string>& items) {
  std::vector<FeatureSpec> out;
  for (const std::string& item : items) {
    size_t colon = item.rfind(':');
    char* end = nullptr;
    long long dim =
        colon == std::string::npos ? 0 : std::strtoll(item.c_str() + colon + 1, &end, 10);
    if (colon == std::string::npos || colon == 0 || end == nullptr || *end != '\0' || dim <= 0 ||
        dim > (1 << 20))
      return InvalidArgumentError("option 'features': '" + item +
                                  "' is not NAME:SIZE (e.g. rgb:1024)");
    for (const auto& f : out)
      if (f.name == item.substr(0, colon))
        return InvalidArgumentError("option 'features': '" + f.name + "' given twice");
    out.push_back({item.substr(0, colon), dim});
  }
  if (out.empty()) return InvalidArgumentError("option 'features' is empty");
  if (out.size() > 16) return InvalidArgumentError("option 'features': at most 16 features");
  return out;
}

std::vector<FeatureSpec> DefaultFeatureSpecs(Level level) {
  if (level == Level::kFrame) return {{"rgb", 1024}, {"audio", 128}};
  return {{"mean_rgb", 1024}, {"mean_audio", 128}};
}

// ---- Summaries (reel inspect) ----

namespace {

// Kind and value count of one Feature; bytes lists count values, and *first gets the first one.
bool Describe(std::string_view feature, RecordSummary::Entry* e, std::string_view* first,
              std::vector<int64_t>* ints) {
  int kind;
  std::string_view list;
  if (!FeatureKind(feature, &kind, &list)) return false;
  e->kind = kind == 1 ? 'b' : kind == 2 ? 'f' : kind == 3 ? 'i' : '?';
  e->length = 0;
  if (kind == 1) {
    return ForEachBytes(list, [&](std::string_view v) {
      if (e->length++ == 0) *first = v;
      return true;
    });
  }
  if (kind == 2) {
    std::string_view packed;
    std::vector<float> unpacked;
    if (!Floats(list, &packed, &unpacked)) return false;
    e->length = static_cast<int64_t>(packed.empty() ? unpacked.size() : packed.size() / 4);
    return true;
  }
  if (kind == 3) {
    ints->clear();
    if (!Int64s(list, ints)) return false;
    e->length = static_cast<int64_t>(ints->size());
  }
  return true;
}

}  // namespace

Status SummarizeRecord(std::string_view payload, std::string_view id_key,
                       std::string_view labels_key, RecordSummary* out) {
  *out = RecordSummary{};
  if (payload.size() > INT_MAX) return Unparsable("payload larger than 2 GiB");
  bool ok = true;
  std::vector<int64_t> ints;
  auto on_feature = [&](std::string_view key, std::string_view value) {
    RecordSummary::Entry e{std::string(key)};
    std::string_view first;
    ok = ok && Describe(value, &e, &first, &ints);
    if (key == id_key && e.kind == 'b') {
      out->id = std::string(first);
    } else if (key == labels_key && e.kind == 'i') {
      out->labels = ints;
    } else {
      out->features.push_back(std::move(e));
    }
  };
  auto on_list = [&](std::string_view key, std::string_view value) {
    RecordSummary::Entry e{std::string(key)};
    e.frames = 0;
    Wire w(value);
    while (ok && w.Next()) {
      std::string_view feature;
      if (w.field() != 1 || w.wire_type() != kLengthDelimited) {
        ok = w.Skip();
        continue;
      }
      ok = w.View(&feature);
      RecordSummary::Entry frame;
      std::string_view first;
      ok = ok && Describe(feature, &frame, &first, &ints);
      if (ok && e.frames++ == 0) {
        e.kind = frame.kind;
        e.length = frame.kind == 'b' ? static_cast<int64_t>(first.size()) : frame.length;
      }
    }
    ok = ok && w.ok();
    out->feature_lists.push_back(std::move(e));
  };
  Wire top(payload);
  while (ok && top.Next()) {
    std::string_view msg;
    if (top.field() == 1 && top.wire_type() == kLengthDelimited) {
      ok = top.View(&msg) && ForEachEntry(msg, on_feature);
    } else if (top.field() == 2 && top.wire_type() == kLengthDelimited) {
      ok = top.View(&msg) && ForEachEntry(msg, on_list);
    } else {
      ok = top.Skip();
    }
  }
  if (!ok || !top.ok()) return Unparsable("record at wire level");
  return Status::Ok();
}

}  // namespace reel::tfrecord

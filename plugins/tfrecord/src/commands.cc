// `reel synth` and `reel inspect` (see commands.h).
#include "commands.h"

#include <algorithm>
#include <map>
#include <ostream>

#include "reel/recordio.h"
#include "synth.h"
#include "tfrecord_source.h"
#include "yt8m.h"

namespace reel::tfrecord {
namespace {

// Splits args into --flag value pairs (bool flags take no value) and positional words.
struct Args {
  std::map<std::string, std::string> flags;
  std::vector<std::string> positional;
};

Result<Args> ParseArgs(const std::vector<std::string>& args, const std::vector<std::string>& valued,
                       const std::vector<std::string>& boolean) {
  Args out;
  auto known = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) {
      out.positional.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (known(boolean, name)) {
      out.flags[name] = eq == std::string::npos ? "true" : value;
    } else if (known(valued, name)) {
      if (eq == std::string::npos) {
        if (i + 1 >= args.size()) return InvalidArgumentError("flag --" + name + " needs a value");
        value = args[++i];
      }
      out.flags[name] = value;
    } else {
      return InvalidArgumentError("unknown flag '" + a + "'");
    }
  }
  return out;
}

Result<int64_t> IntFlag(const Args& a, const std::string& name, int64_t def) {
  auto it = a.flags.find(name);
  if (it == a.flags.end()) return def;
  char* end = nullptr;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0')
    return InvalidArgumentError("flag --" + name + ": '" + it->second + "' is not an integer");
  return static_cast<int64_t>(v);
}

Result<double> FloatFlag(const Args& a, const std::string& name, double def) {
  auto it = a.flags.find(name);
  if (it == a.flags.end()) return def;
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0')
    return InvalidArgumentError("flag --" + name + ": '" + it->second + "' is not a number");
  return v;
}

std::string StrFlag(const Args& a, const std::string& name, const std::string& def) {
  auto it = a.flags.find(name);
  return it == a.flags.end() ? def : it->second;
}

class SynthCommand : public Command {
 public:
  std::string Usage() const override {
    return "reel synth --out DIR --videos N --classes C --level frame|video --shards K [--seed S] "
           "[--min-frames F] [--max-frames F] [--max-labels L] [--split] [--noise X] "
           "[--amplitude A] [--prefix P] [--compression none|zlib|gzip] [--test-videos T]\n"
           "  --test-videos T: also T held-out videos of the same planted signal; then the "
           "shards go to DIR/train/ and DIR/test/";
  }
  Status Run(const std::vector<std::string>& args, CommandContext& ctx) override {
    REEL_ASSIGN_OR_RETURN(Args a, ParseArgs(args,
                                            {"out", "videos", "classes", "level", "shards", "seed",
                                             "min-frames", "max-frames", "max-labels", "noise",
                                             "amplitude", "prefix", "compression", "test-videos"},
                                            {"split"}));
    if (!a.positional.empty())
      return InvalidArgumentError("synth takes no positional arguments ('" + a.positional[0] +
                                  "')");
    if (ctx.storage == nullptr) return InvalidArgumentError("synth needs a storage resolver");
    SynthOptions o;
    o.out = StrFlag(a, "out", "");
    REEL_ASSIGN_OR_RETURN(o.videos, IntFlag(a, "videos", o.videos));
    REEL_ASSIGN_OR_RETURN(o.classes, IntFlag(a, "classes", o.classes));
    REEL_ASSIGN_OR_RETURN(o.shards, IntFlag(a, "shards", o.shards));
    REEL_ASSIGN_OR_RETURN(int64_t seed, IntFlag(a, "seed", static_cast<int64_t>(o.seed)));
    o.seed = static_cast<uint64_t>(seed);
    REEL_ASSIGN_OR_RETURN(o.min_frames, IntFlag(a, "min-frames", o.min_frames));
    REEL_ASSIGN_OR_RETURN(o.max_frames, IntFlag(a, "max-frames", o.max_frames));
    REEL_ASSIGN_OR_RETURN(o.max_labels, IntFlag(a, "max-labels", o.max_labels));
    REEL_ASSIGN_OR_RETURN(o.noise, FloatFlag(a, "noise", o.noise));
    REEL_ASSIGN_OR_RETURN(o.amplitude, FloatFlag(a, "amplitude", o.amplitude));
    o.prefix = StrFlag(a, "prefix", o.prefix);
    REEL_ASSIGN_OR_RETURN(o.test_videos, IntFlag(a, "test-videos", o.test_videos));
    o.split = StrFlag(a, "split", "false") == "true";
    std::string level = StrFlag(a, "level", "frame");
    if (level != "frame" && level != "video")
      return InvalidArgumentError("flag --level: '" + level + "' is not frame or video");
    o.level = level == "frame" ? Level::kFrame : Level::kVideo;
    std::string comp = StrFlag(a, "compression", "none");
    if (comp == "auto") return InvalidArgumentError("flag --compression: say none, zlib or gzip");
    REEL_ASSIGN_OR_RETURN(o.compression, recordio::ParseCompression(comp, ""));
    REEL_ASSIGN_OR_RETURN(auto uris, WriteSynthetic(*ctx.storage, o));
    if (ctx.out && o.test_videos > 0)
      *ctx.out << "wrote " << o.videos << " training and " << o.test_videos << " held-out " << level
               << "-level videos (" << o.classes << " classes"
               << (o.split ? ", split rgb/audio" : "") << ") to " << o.shards
               << " shard(s) each: " << uris.front() << " ... and "
               << uris[static_cast<size_t>(o.shards)] << " ...\n";
    else if (ctx.out)
      *ctx.out << "wrote " << o.videos << " " << level << "-level videos (" << o.classes
               << " classes" << (o.split ? ", split rgb/audio" : "") << ") to " << uris.size()
               << " shard(s): " << (uris.empty() ? "" : uris.front())
               << (uris.size() > 1 ? " ..." : "") << "\n";
    return Status::Ok();
  }
};

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);  // bytes shown as Latin-1 code points
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

void PrintJson(std::ostream& os, const std::string& uri, uint64_t offset, const RecordSummary& s) {
  os << "{\"file\":" << JsonString(uri) << ",\"offset\":" << offset
     << ",\"id\":" << JsonString(s.id) << ",\"labels\":[";
  for (size_t i = 0; i < s.labels.size(); ++i) os << (i ? "," : "") << s.labels[i];
  os << "],\"features\":{";
  for (size_t i = 0; i < s.features.size(); ++i)
    os << (i ? "," : "") << JsonString(s.features[i].name) << ":" << s.features[i].length;
  os << "},\"feature_lists\":{";
  for (size_t i = 0; i < s.feature_lists.size(); ++i)
    os << (i ? "," : "") << JsonString(s.feature_lists[i].name)
       << ":{\"frames\":" << s.feature_lists[i].frames
       << ",\"length\":" << s.feature_lists[i].length << "}";
  os << "}}\n";
}

void PrintText(std::ostream& os, int64_t index, uint64_t offset, const RecordSummary& s) {
  os << "  #" << index << " @" << offset << " id=" << s.id << " labels=[";
  for (size_t i = 0; i < s.labels.size(); ++i) os << (i ? "," : "") << s.labels[i];
  os << "]";
  for (const auto& f : s.features) os << " " << f.name << ":" << f.kind << "[" << f.length << "]";
  for (const auto& f : s.feature_lists)
    os << " " << f.name << ":" << f.kind << "[" << f.frames << "x" << f.length << "]";
  os << "\n";
}

class InspectCommand : public Command {
 public:
  std::string Usage() const override {
    return "reel inspect FILES... [--json] [--limit N] [--compression auto|none|zlib|gzip] "
           "[--id-key id]";
  }
  Status Run(const std::vector<std::string>& args, CommandContext& ctx) override {
    REEL_ASSIGN_OR_RETURN(
        Args a, ParseArgs(args, {"limit", "compression", "id-key", "labels-key"}, {"json"}));
    if (a.positional.empty()) return InvalidArgumentError("inspect needs at least one file");
    if (ctx.storage == nullptr || ctx.out == nullptr)
      return InvalidArgumentError("inspect needs storage and an output stream");
    const bool json = StrFlag(a, "json", "false") == "true";
    REEL_ASSIGN_OR_RETURN(int64_t limit, IntFlag(a, "limit", json ? -1 : 10));
    const std::string comp = StrFlag(a, "compression", "auto");
    const std::string id_key = StrFlag(a, "id-key", "id");
    const std::string labels_key = StrFlag(a, "labels-key", "labels");
    Status first_error;
    for (const std::string& pattern : a.positional) {
      REEL_ASSIGN_OR_RETURN(Storage * storage, ctx.storage->ForUri(pattern));
      REEL_ASSIGN_OR_RETURN(auto found, storage->Glob(pattern));
      // The first error is returned (the host prints it); later ones are printed here.
      auto note = [&](const Status& s) {
        if (s.ok()) return;
        if (first_error.ok()) {
          first_error = s;
        } else if (ctx.err) {
          *ctx.err << s << "\n";
        }
      };
      if (found.empty()) note(NoFileMatches(pattern));
      for (const ObjectInfo& info : found)
        note(InspectFile(*storage, info, comp, id_key, labels_key, json, limit, ctx));
    }
    return first_error;
  }

 private:
  Status InspectFile(Storage& storage, const ObjectInfo& info, const std::string& comp,
                     const std::string& id_key, const std::string& labels_key, bool json,
                     int64_t limit, CommandContext& ctx) {
    REEL_ASSIGN_OR_RETURN(auto c, recordio::ParseCompression(comp, info.uri));
    REEL_ASSIGN_OR_RETURN(auto file, storage.OpenRead(info.uri));
    recordio::RecordReader reader(file.get(), {.compression = c});
    std::ostream& out = *ctx.out;
    std::string payload;
    RecordSummary summary;
    int64_t count = 0;
    Status error;
    while (true) {
      uint64_t offset = reader.offset();
      Status s = reader.ReadRecord(&payload);
      if (s.code() == StatusCode::kOutOfRange) break;
      if (s.ok())
        s = SummarizeRecord(payload, id_key, labels_key, &summary)
                .WithContext(info.uri + ": offset " + std::to_string(offset));
      if (!s.ok()) {
        error = s;
        break;
      }
      if (limit < 0 || count < limit) {
        if (json) {
          PrintJson(out, info.uri, offset, summary);
        } else {
          if (count == 0) out << info.uri << ":\n";
          PrintText(out, count, offset, summary);
        }
      }
      ++count;
    }
    if (!json) {
      out << info.uri << ": " << count << " record(s), " << info.size << " bytes ("
          << recordio::CompressionName(c) << ")";
      if (!error.ok()) out << "; first error: " << error;
      out << "\n";
    }
    return error;
  }
};

}  // namespace

std::unique_ptr<Command> MakeSynthCommand() { return std::make_unique<SynthCommand>(); }
std::unique_ptr<Command> MakeInspectCommand() { return std::make_unique<InspectCommand>(); }

}  // namespace reel::tfrecord

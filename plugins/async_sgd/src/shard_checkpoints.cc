// The servers' own checkpoints of their shards (see shard_checkpoints.h).
#include "shard_checkpoints.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <tuple>
#include <utility>

namespace reel::async_sgd {
namespace {

constexpr char kShardStateMagic[4] = {'R', 'A', 'S', 'S'};
constexpr uint32_t kFormat = 1;

// Parses a file name (the last segment of `uri`); false if it is not a shard file.
bool ParseName(std::string_view uri, int64_t* version, int* shard, int* shards) {
  const size_t slash = uri.rfind('/');
  const std::string name(slash == std::string_view::npos ? uri : uri.substr(slash + 1));
  char tail[8] = {};
  return std::sscanf(name.c_str(), "async-shard-v%" SCNd64 "-%d-of-%d.%5s", version, shard, shards,
                     tail) == 4 &&
         std::strcmp(tail, "rasg") == 0 && ShardFileName(*version, *shard, *shards) == name;
}

}  // namespace

std::string ShardFileName(int64_t version, int shard, int shards) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "async-shard-v%012" PRId64 "-%d-of-%d.rasg", version, shard,
                shards);
  return buf;
}

std::string EncodeShard(const ShardSnapshot& s) {
  std::string out(kShardStateMagic, sizeof kShardStateMagic);
  auto put = [&out](const auto& v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(kFormat);
  put(static_cast<uint32_t>(s.shard));
  put(static_cast<uint32_t>(s.shards));
  put(s.version);
  put(static_cast<uint64_t>(s.values.size()));
  out.append(reinterpret_cast<const char*>(s.values.data()), s.values.size() * sizeof(float));
  out += s.state;
  return out;
}

Result<ShardSnapshot> DecodeShard(std::string_view bytes, std::string_view where) {
  auto bad = [&](const std::string& why) { return DataLossError(std::string(where) + ": " + why); };
  char magic[4];
  uint32_t format = 0, shard = 0, shards = 0;
  uint64_t floats = 0;
  ShardSnapshot s;
  if (!TakeBytes(bytes, magic, sizeof magic) ||
      std::memcmp(magic, kShardStateMagic, sizeof kShardStateMagic) != 0)
    return bad("not an async_sgd shard checkpoint (no 'RASS' header)");
  if (!TakeBytes(bytes, &format, sizeof format) || !TakeBytes(bytes, &shard, sizeof shard) ||
      !TakeBytes(bytes, &shards, sizeof shards) ||
      !TakeBytes(bytes, &s.version, sizeof s.version) || !TakeBytes(bytes, &floats, sizeof floats))
    return bad("truncated header");
  if (format != kFormat)
    return bad("format " + std::to_string(format) + ", this build reads " +
               std::to_string(kFormat));
  if (floats > bytes.size() / sizeof(float))
    return bad("holds " + std::to_string(bytes.size()) + " bytes after its header, too few for " +
               std::to_string(floats) + " floats");
  s.shard = static_cast<int>(shard);
  s.shards = static_cast<int>(shards);
  s.values.resize(floats);
  TakeBytes(bytes, s.values.data(), floats * sizeof(float));
  s.state.assign(bytes);
  return s;
}

std::string ShardCheckpoints::Uri(const std::string& name) const {
  if (dir_.empty() || dir_.back() == '/') return dir_ + name;
  return dir_ + "/" + name;
}

Status ShardCheckpoints::Write(const ShardSnapshot& s) {
  REEL_ASSIGN_OR_RETURN(Storage * storage, storage_.ForUri(dir_));
  REEL_RETURN_IF_ERROR(storage->CreateDir(dir_));
  const std::string uri = Uri(ShardFileName(s.version, s.shard, s.shards));
  REEL_RETURN_IF_ERROR(
      WriteAll(*storage, uri, EncodeShard(s)).WithContext("writing shard checkpoint " + uri));
  REEL_ASSIGN_OR_RETURN(std::vector<ShardFile> files, Files(-1));
  if (keep_ > 0) {
    auto mine = [&](const ShardFile& f) { return f.shards == s.shards && f.shard == s.shard; };
    size_t over = static_cast<size_t>(std::count_if(files.begin(), files.end(), mine));
    over = over > static_cast<size_t>(keep_) ? over - static_cast<size_t>(keep_) : 0;
    // Oldest first: the first `over` of this shard's files go.
    for (auto f = files.begin(); over > 0 && f != files.end();) {
      if (!mine(*f)) {
        ++f;
        continue;
      }
      REEL_RETURN_IF_ERROR(Delete(*storage, *f));
      f = files.erase(f);
      --over;
    }
  }
  if (s.shard != 0) return Status::Ok();
  // A resume takes the newest complete set of any layout: once this layout has one, another
  // layout's older files can never be taken again (a run on another number of servers left them).
  int64_t newest = -1;
  for (const ShardSet& set : CompleteSetsOf(files))
    if (set.shards == s.shards) newest = set.version;
  for (const ShardFile& f : files)
    if (f.shards != s.shards && f.version < newest) REEL_RETURN_IF_ERROR(Delete(*storage, f));
  return Status::Ok();
}

Result<std::vector<ShardCheckpoints::ShardFile>> ShardCheckpoints::Files(int shards) {
  REEL_ASSIGN_OR_RETURN(Storage * storage, storage_.ForUri(dir_));
  const std::string of = shards < 0 ? "*" : std::to_string(shards);
  REEL_ASSIGN_OR_RETURN(std::vector<ObjectInfo> objects,
                        storage->Glob(Uri("async-shard-v*-of-" + of + ".rasg")));
  std::vector<ShardFile> found;
  for (const ObjectInfo& o : objects) {
    ShardFile f;
    if (!ParseName(o.uri, &f.version, &f.shard, &f.shards) || f.shards < 1 || f.shard < 0 ||
        f.shard >= f.shards || (shards >= 0 && f.shards != shards))
      continue;
    found.push_back(f);
  }
  std::sort(found.begin(), found.end(), [](const ShardFile& a, const ShardFile& b) {
    return std::tie(a.version, a.shards, a.shard) < std::tie(b.version, b.shards, b.shard);
  });
  return found;
}

Status ShardCheckpoints::Delete(Storage& storage, const ShardFile& f) {
  Status d = storage.Delete(Uri(ShardFileName(f.version, f.shard, f.shards)));
  if (!d.ok() && d.code() != StatusCode::kNotFound) return d;
  return Status::Ok();
}

Result<std::vector<ShardSet>> ShardCheckpoints::CompleteSets() {
  REEL_ASSIGN_OR_RETURN(std::vector<ShardFile> files, Files(-1));
  return CompleteSetsOf(files);
}

std::vector<ShardSet> ShardCheckpoints::CompleteSetsOf(const std::vector<ShardFile>& files) {
  std::map<std::pair<int64_t, int>, std::set<int>> sets;
  for (const ShardFile& f : files) sets[{f.version, f.shards}].insert(f.shard);
  std::vector<ShardSet> out;
  for (const auto& [set, have] : sets)
    if (static_cast<int>(have.size()) == set.second) out.push_back({set.first, set.second});
  return out;
}

Result<ShardSnapshot> ShardCheckpoints::Read(int64_t version, int shard, int shards) {
  REEL_ASSIGN_OR_RETURN(Storage * storage, storage_.ForUri(dir_));
  const std::string uri = Uri(ShardFileName(version, shard, shards));
  REEL_ASSIGN_OR_RETURN(std::string bytes, ReadAll(*storage, uri));
  REEL_ASSIGN_OR_RETURN(ShardSnapshot s, DecodeShard(bytes, uri));
  if (s.shard != shard || s.shards != shards || s.version != version)
    return DataLossError(uri + ": holds shard " + std::to_string(s.shard) + " of " +
                         std::to_string(s.shards) + " at version " + std::to_string(s.version) +
                         ", its name says otherwise");
  return s;
}

Status ShardCheckpoints::DeleteNewerThan(int64_t version, int shard, int shards) {
  REEL_ASSIGN_OR_RETURN(Storage * storage, storage_.ForUri(dir_));
  REEL_ASSIGN_OR_RETURN(std::vector<ShardFile> files, Files(-1));
  for (const ShardFile& f : files) {
    const bool mine = f.shards == shards && f.shard == shard;
    // Another layout's files: one server (shard 0) deletes them.
    const bool others = f.shards != shards && shard == 0;
    if (f.version > version && (mine || others)) REEL_RETURN_IF_ERROR(Delete(*storage, f));
  }
  return Status::Ok();
}

}  // namespace reel::async_sgd

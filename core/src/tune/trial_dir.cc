#include "trial_dir.h"

#include <filesystem>
#include <optional>
#include <vector>

namespace reel::core::tune {
namespace {

namespace fs = std::filesystem;

// The newest checkpoint object in `dir` ("ckpt-<zero-padded step>.reelckpt" sorts by step).
std::optional<fs::path> NewestCheckpoint(const fs::path& dir) {
  std::error_code ec;
  std::optional<fs::path> best;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("ckpt-", 0) != 0 || it->path().extension() != ".reelckpt") continue;
    if (!best || name > best->filename().string()) best = it->path();
  }
  return best;
}

}  // namespace

std::string TrialDirName(int64_t config, int rung) {
  return "trials/c" + std::to_string(config) + "/r" + std::to_string(rung);
}

Result<bool> PrepareTrialDir(const std::string& workdir, int64_t config, int rung, bool keep) {
  const fs::path dir = fs::path(workdir) / TrialDirName(config, rung);
  const fs::path checkpoints = dir / "checkpoints";
  if (keep && NewestCheckpoint(checkpoints)) return true;
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(checkpoints, ec);
  if (ec) return UnavailableError(checkpoints.string() + ": " + ec.message());
  if (rung == 0) return false;
  const fs::path previous = fs::path(workdir) / TrialDirName(config, rung - 1) / "checkpoints";
  std::optional<fs::path> from = NewestCheckpoint(previous);
  if (!from)
    return FailedPreconditionError(
        "trial c" + std::to_string(config) + "/r" + std::to_string(rung) +
        ": the previous rung left no checkpoint in " + previous.string());
  fs::copy_file(*from, checkpoints / from->filename(), ec);
  if (ec) return UnavailableError(from->string() + ": copy failed: " + ec.message());
  return true;
}

Status TrimTrialCheckpoints(const std::string& workdir, int64_t config, int rung, bool needed) {
  const fs::path checkpoints = fs::path(workdir) / TrialDirName(config, rung) / "checkpoints";
  std::error_code ec;
  if (!needed) {
    fs::remove_all(checkpoints, ec);
    if (ec) return UnavailableError(checkpoints.string() + ": " + ec.message());
    return Status::Ok();
  }
  const std::optional<fs::path> newest = NewestCheckpoint(checkpoints);
  if (!newest) return Status::Ok();
  std::vector<fs::path> older;
  for (fs::directory_iterator it(checkpoints, ec), end; !ec && it != end; it.increment(ec))
    if (it->path() != *newest) older.push_back(it->path());
  for (const fs::path& p : older) {
    fs::remove_all(p, ec);
    if (ec) return UnavailableError(p.string() + ": " + ec.message());
  }
  return Status::Ok();
}

}  // namespace reel::core::tune

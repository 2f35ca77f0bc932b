// Storage conformance (reel/storage.h): round trips, reads at the end, all-or-nothing writes,
// globbing within one segment, deletion and the errors for missing objects. Every object is
// written under a fresh folder of the root and deleted at the end.
#include <unistd.h>

#include <filesystem>
#include <random>

#include "checks.h"

namespace reel::core::conformance_internal {
namespace {

std::span<const std::byte> Bytes(std::string_view s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

std::string Names(const std::vector<ObjectInfo>& objects) {
  std::string out;
  for (const ObjectInfo& o : objects) out += (out.empty() ? "" : ", ") + o.uri;
  return "[" + out + "]";
}

// Whether Glob(dir/*.bin) lists `uri` (a storage's own temporary names may show, its final
// name may not).
bool Listed(Storage& s, const std::string& dir, const std::string& uri) {
  Result<std::vector<ObjectInfo>> listed = s.Glob(dir + "/*.bin");
  if (!listed.ok()) return false;
  for (const ObjectInfo& o : *listed)
    if (o.uri == uri) return true;
  return false;
}

Status RoundTrip(Storage& s, const std::string& dir) {
  const std::string uri = dir + "/round_trip.bin", text = "0123456789abcdef";
  REEL_RETURN_IF_ERROR(WriteAll(s, uri, text));
  REEL_ASSIGN_OR_RETURN(std::string back, ReadAll(s, uri));
  if (back != text) return DataLossError(uri + ": read back '" + back + "', wrote '" + text + "'");
  REEL_ASSIGN_OR_RETURN(auto file, s.OpenRead(uri));
  REEL_ASSIGN_OR_RETURN(uint64_t size, file->Size());
  if (size != text.size())
    return DataLossError(uri + ": Size() " + std::to_string(size) + ", wrote 16");
  return Status::Ok();
}

Status ReadsAtTheEnd(Storage& s, const std::string& dir) {
  const std::string uri = dir + "/round_trip.bin";
  REEL_ASSIGN_OR_RETURN(auto file, s.OpenRead(uri));
  std::string buf(10, '\0');
  auto out = std::as_writable_bytes(std::span<char>(buf));
  REEL_ASSIGN_OR_RETURN(size_t n, file->Read(10, out));
  if (n != 6 || buf.substr(0, 6) != "abcdef")
    return DataLossError("Read(10, 10 bytes) of a 16-byte object gave " + std::to_string(n) +
                         " bytes '" + buf.substr(0, n) + "', want 6 bytes 'abcdef'");
  REEL_ASSIGN_OR_RETURN(n, file->Read(16, out));
  if (n != 0) return DataLossError("Read at the end gave " + std::to_string(n) + " bytes, want 0");
  REEL_ASSIGN_OR_RETURN(n, file->Read(100, out));
  if (n != 0)
    return DataLossError("Read past the end gave " + std::to_string(n) + " bytes, want 0");
  return Status::Ok();
}

Status InvisibleUntilClose(Storage& s, const std::string& dir) {
  const std::string uri = dir + "/pending.bin";
  REEL_ASSIGN_OR_RETURN(auto file, s.OpenWrite(uri));
  REEL_RETURN_IF_ERROR(file->Append(Bytes("pending")));
  if (Listed(s, dir, uri)) return FailedPreconditionError("before Close, Glob lists " + uri);
  if (s.OpenRead(uri).ok()) return FailedPreconditionError(uri + " opens before Close");
  REEL_RETURN_IF_ERROR(file->Close());
  REEL_ASSIGN_OR_RETURN(std::string back, ReadAll(s, uri));
  return back == "pending" ? Status::Ok() : DataLossError("after Close it reads '" + back + "'");
}

Status DiscardedWithoutClose(Storage& s, const std::string& dir) {
  const std::string uri = dir + "/abandoned.bin";
  {
    REEL_ASSIGN_OR_RETURN(auto file, s.OpenWrite(uri));
    REEL_RETURN_IF_ERROR(file->Append(Bytes("half an object")));
  }
  if (Listed(s, dir, uri) || s.OpenRead(uri).ok())
    return FailedPreconditionError(uri + " exists after its writer was destroyed unclosed");
  return Status::Ok();
}

Status GlobsWithinASegment(Storage& s, const std::string& dir) {
  for (const char* name : {"/g/b2.rec", "/g/a1.rec", "/g/a10.rec", "/g/sub/a3.rec", "/g/c1.txt"})
    REEL_RETURN_IF_ERROR(WriteAll(s, dir + name, name));
  auto expect = [&](const std::string& pattern, std::vector<std::string> want) -> Status {
    REEL_ASSIGN_OR_RETURN(auto got, s.Glob(dir + pattern));
    std::vector<std::string> uris;
    for (const ObjectInfo& o : got) uris.push_back(o.uri);
    for (std::string& w : want) w = dir + w;
    if (uris != want)
      return InvalidArgumentError("Glob(" + dir + pattern + ") gave " + Names(got) + ", want " +
                                  std::to_string(want.size()) + " objects sorted by URI");
    return Status::Ok();
  };
  REEL_RETURN_IF_ERROR(expect("/g/*.rec", {"/g/a1.rec", "/g/a10.rec", "/g/b2.rec"}));
  REEL_RETURN_IF_ERROR(expect("/g/a?.rec", {"/g/a1.rec"}));
  REEL_RETURN_IF_ERROR(expect("/g/[ab]1*", {"/g/a1.rec", "/g/a10.rec"}));
  REEL_RETURN_IF_ERROR(expect("/g/*/a3.rec", {"/g/sub/a3.rec"}));
  return expect("/g/none*", {});
}

Status DeletesAndNamesMissingObjects(Storage& s, const std::string& dir) {
  const std::string uri = dir + "/round_trip.bin";
  REEL_RETURN_IF_ERROR(s.Delete(uri));
  Result<std::unique_ptr<RandomAccessFile>> gone = s.OpenRead(uri);
  REEL_RETURN_IF_ERROR(ExpectCode(gone.status(), StatusCode::kNotFound, "OpenRead after Delete"));
  if (gone.status().message().find("round_trip.bin") == std::string::npos)
    return InvalidArgumentError("the NotFound error does not name the object: " +
                                gone.status().ToString());
  return ExpectCode(s.Delete(uri), StatusCode::kNotFound, "Delete of a deleted object");
}

}  // namespace

void CheckStorage(const Registry& registry, const ComponentEntry& entry,
                  const ConformanceOptions& options, const CheckSink& sink) {
  const std::string& scheme = entry.info.name;
  std::string root = options.storage_root, temp_dir;
  if (root.empty() && scheme == "file") {
    std::string tmpl = (std::filesystem::temp_directory_path() / "reel-check-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr)
      return (void)Report(sink, "storage root", InternalError("cannot make a temporary directory"));
    root = temp_dir = tmpl;
  }
  if (root.empty())
    return Skip(sink, "storage checks",
                "give a writable location of the '" + scheme + "' storage with --root " + scheme +
                    "://...");
  Result<Owned<Storage>> made = registry.CreateStorage(scheme, options.options);
  if (!Report(sink, "creates from its options", made.status())) return;
  Storage& s = **made;
  // A fresh folder per run, so two checks against one bucket do not meet.
  const std::string dir = root + "/check-" + std::to_string(std::random_device{}());
  (void)s.CreateDir(dir);
  (void)s.CreateDir(dir + "/g");
  (void)s.CreateDir(dir + "/g/sub");
  if (Report(sink, "a written object reads back whole, with its size", RoundTrip(s, dir))) {
    Report(sink, "reads stop at the end (fewer bytes, then 0)", ReadsAtTheEnd(s, dir));
    Report(sink, "Delete removes; a missing object is NotFound naming it",
           DeletesAndNamesMissingObjects(s, dir));
  }
  Report(sink, "a write is invisible until Close", InvisibleUntilClose(s, dir));
  Report(sink, "a writer destroyed without Close leaves nothing", DiscardedWithoutClose(s, dir));
  Report(sink, "Glob: sorted, '*' '?' '[..]' within one path segment", GlobsWithinASegment(s, dir));
  for (const char* name : {"/pending.bin", "/abandoned.bin", "/g/b2.rec", "/g/a1.rec", "/g/a10.rec",
                           "/g/sub/a3.rec", "/g/c1.txt"})
    (void)s.Delete(dir + name);
  if (!temp_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(temp_dir, ec);
  }
}

}  // namespace reel::core::conformance_internal

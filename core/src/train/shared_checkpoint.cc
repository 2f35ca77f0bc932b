// Rank 0's checkpoint for every rank (see shared_checkpoint.h).
//
// Wire: rank 0 broadcasts one byte string: uint8 status code, uint32 URI length, URI, then either
// the checkpoint object's bytes as stored (code OK) or the error message. Then every rank's
// objection (empty if none) is gathered, so all ranks reach the same verdict, and every rank
// decodes the same bytes (checksum included), so a damaged object fails them all alike. Rank 0
// neither decodes nor re-encodes before sending, and the object is copied once, into the message.
#include "train/shared_checkpoint.h"

#include <cstdint>
#include <cstring>
#include <string_view>

#include "reel/core/evaluator.h"

namespace reel::core {
namespace {

std::string BaseName(const std::string& uri) {
  const size_t slash = uri.find_last_of('/');
  return slash == std::string::npos ? uri : uri.substr(slash + 1);
}

std::string Pack(StatusCode code, const std::string& uri, std::string_view body) {
  const uint32_t n = static_cast<uint32_t>(uri.size());
  std::string out;
  out.reserve(1 + sizeof n + uri.size() + body.size());
  out.push_back(static_cast<char>(code));
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
  out.append(uri);
  out.append(body);
  return out;
}

struct Packed {
  StatusCode code;
  std::string uri;
  std::string_view body;  // into the message
};

Result<Packed> Unpack(const std::string& bytes) {
  uint32_t n = 0;
  if (bytes.size() < 1 + sizeof n) return DataLossError("checkpoint broadcast: short header");
  std::memcpy(&n, bytes.data() + 1, sizeof n);
  if (bytes.size() < 1 + sizeof n + n) return DataLossError("checkpoint broadcast: short URI");
  return Packed{static_cast<StatusCode>(bytes[0]), bytes.substr(1 + sizeof n, n),
                std::string_view(bytes).substr(1 + sizeof n + n)};
}

// What this rank (not 0) objects to, given rank 0's newest checkpoint ("" for none).
std::string Objection(CheckpointManager& checkpoints, int rank, const std::string& rank0_uri) {
  auto mine = checkpoints.List();
  if (!mine.ok()) return "rank " + std::to_string(rank) + ": " + mine.status().ToString();
  if (mine->empty()) return "";  // its own disk has none: rank 0's copy is what counts
  const std::string& newest = mine->back().second;
  if (rank0_uri.empty())
    return "rank " + std::to_string(rank) + " finds checkpoint " + newest +
           " but rank 0 finds none in " + checkpoints.dir();
  if (BaseName(newest) != BaseName(rank0_uri))
    return "rank " + std::to_string(rank) + " finds checkpoint " + newest +
           " but rank 0 resumes from " + rank0_uri;
  return "";
}

}  // namespace

Result<CheckpointState> LoadNewestFromRank0(CheckpointManager& checkpoints, Communicator& comm,
                                            std::chrono::milliseconds timeout, std::string* uri) {
  std::string message;
  if (comm.rank() == 0) {
    std::string read_uri;
    Result<std::string> bytes = checkpoints.ReadNewest(&read_uri);
    message = bytes.ok() ? Pack(StatusCode::kOk, read_uri, *bytes)
                         : Pack(bytes.status().code(), "", bytes.status().message());
  }
  REEL_RETURN_IF_ERROR(BroadcastBytes(comm, message, 0, timeout)
                           .WithContext("resume: broadcasting rank 0's checkpoint"));
  REEL_ASSIGN_OR_RETURN(Packed from0, Unpack(message));
  const std::string objection =
      comm.rank() == 0 ? "" : Objection(checkpoints, comm.rank(), from0.uri);
  REEL_ASSIGN_OR_RETURN(std::vector<std::string> objections, GatherBytes(comm, objection, timeout));
  std::string all;
  for (const std::string& o : objections)
    if (!o.empty()) all += (all.empty() ? "" : "; ") + o;
  if (!all.empty())
    return FailedPreconditionError("resume: ranks disagree about the newest checkpoint (" + all +
                                   "); every rank must see rank 0's checkpoint directory or none");
  if (from0.code != StatusCode::kOk) {
    Status s(from0.code, std::string(from0.body));
    return comm.rank() == 0 ? s : s.WithContext("rank 0");
  }
  if (uri) *uri = from0.uri;
  return DecodeCheckpoint(from0.body, from0.uri);
}

}  // namespace reel::core

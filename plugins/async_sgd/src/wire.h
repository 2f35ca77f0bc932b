// Messages between async_sgd workers and parameter servers: a fixed header, then (for pushes,
// pulls' replies and state replies) the raw payload as a second message on its own tag, so the
// receiver can take it straight into place with RecvInto (a worker into its arena, a server into
// its push buffer).
//
// A worker sends a Header on kRequestTag (its Kind below says what follows and what the server
// answers); a server answers on kReplyTag, payloads on kPayloadTag and kReplyPayloadTag. A push's
// `step` is the worker's step after it (the trainer's, resumes counted, when the trainer noted
// it), `steps` and `examples` what the push carries, and `version` the shard version its gradient
// was computed on (with `overlap`, the weights before the newest pull; for a mean of push_every
// steps, its oldest step's): the server's staleness is its own version minus this one. With
// max_staleness K, a push staler than K is refused before anything of it is applied (kAck or
// kPushPulled with aux = 1); the worker then pulls before its next step.
#ifndef REEL_PLUGINS_ASYNC_SGD_SRC_WIRE_H_
#define REEL_PLUGINS_ASYNC_SGD_SRC_WIRE_H_

#include <cstdint>
#include <cstring>
#include <span>

#include "reel/transport.h"

namespace reel::async_sgd {

// User tags (reel/transport.h), away from the bottom of the range other components use first.
constexpr int kRequestTag = 7100;
constexpr int kPayloadTag = 7101;
constexpr int kReplyTag = 7102;
constexpr int kReplyPayloadTag = 7103;

// Requests (worker -> server) and their replies (server -> worker, on kReplyTag).
enum class Kind : uint32_t {
  kPush = 1,       // + count floats (the shard's gradient) on kPayloadTag; answered kAck{version}
  kPushDelta = 2,  // + count floats (the shard's parameter delta) on kPayloadTag; answered kAck
  // Answered kPulled{version, count} + count floats on kReplyPayloadTag.
  kPull = 3,
  // A cut of the shard for the lead's checkpoint, taken at one instant between two updates:
  // kStateBytes{version, count = state bytes, steps = floats}, then on kReplyPayloadTag the
  // shard's values (floats) and its state (bytes: int64 version, the rule's state).
  kState = 4,
  kDone = 5,  // `step`: how many of its pushes this server applied, as the worker counted; no reply
  kAck = 6,
  kPulled = 7,
  kStateBytes = 8,
  // `step` names a worker's rank; once the server dropped that worker (or it said done) it
  // replies kAppliedWork{step, version = pushes applied, steps, examples}: what it applied of them.
  kApplied = 9,
  kAppliedWork = 10,
  // A push and a pull in one exchange (locking only): count floats in chunks of `aux` floats,
  // each a message on kPayloadTag; once all arrived (no lock held meanwhile) the server applies
  // them as one update under the shard's lock, then sends the fresh values back in chunks of
  // `aux` on kReplyPayloadTag and kPushPulled{version after the push, count, aux = 1 if refused}.
  // A push cut off half way is never applied.
  kPushPull = 11,
  kPushPulled = 12,
  // `step` names the lead worker's rank, which the asker lost; once the server dropped it (or it
  // said done) it replies kLeadIs{step = the lowest worker rank it still serves, aux = 1}; aux = 0
  // (and step that rank) if it still serves it at the deadline. Asked of the first server only,
  // so every worker hears the same answer.
  kLead = 13,
  kLeadIs = 14,
  // Answered kExamplesAre{examples, steps, version = pushes}: the sums over every worker of what
  // the pushes it applied in this session carried (the lead's whole-job examples/s; asked of the
  // first server only).
  kExamples = 15,
  kExamplesAre = 16,
};

struct Header {
  Kind kind = Kind::kPull;
  uint32_t shard = 0;
  int64_t step = 0;      // the worker's step (kDone: pushes sent to this server; see the top)
  int64_t version = 0;   // request: the shard version the worker's copy is based on; reply: now
  int64_t count = 0;     // floats (bytes for kStateBytes) in the payload that follows
  int64_t steps = 0;     // a push: the worker's steps it carries (push_every, or an epoch's)
  int64_t examples = 0;  // a push: the examples of those steps (0 if nobody noted them)
  float lr = 0.0f;
  // kPushPull: floats per chunk; kAck, kPushPulled: 1 if the push was refused as too stale;
  // kAppliedWork, kLeadIs: 1 if the worker asked about was dropped
  uint32_t aux = 0;
};
static_assert(sizeof(Header) == 56);

inline Header MakeHeader(Kind kind, int shard, int64_t step = 0, int64_t version = 0,
                         int64_t count = 0, float lr = 0.0f) {
  Header h;
  h.kind = kind;
  h.shard = static_cast<uint32_t>(shard);
  h.step = step;
  h.version = version;
  h.count = count;
  h.lr = lr;
  return h;
}

inline std::span<const std::byte> Bytes(const Header& h) {
  return std::as_bytes(std::span<const Header>(&h, 1));
}

inline Status SendHeader(Communicator& comm, int dest, int tag, const Header& h, Deadline d) {
  return comm.Send(dest, tag, Bytes(h), d);
}

inline Result<Header> RecvHeader(Communicator& comm, int source, int tag, Deadline d) {
  Header h;
  REEL_RETURN_IF_ERROR(
      comm.RecvInto(source, tag, std::as_writable_bytes(std::span<Header>(&h, 1)), d));
  return h;
}

const char* KindName(Kind k);

}  // namespace reel::async_sgd

#endif  // REEL_PLUGINS_ASYNC_SGD_SRC_WIRE_H_

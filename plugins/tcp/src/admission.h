// Admitting connections that have not authenticated yet, so that a flood of them cannot keep the
// group's own ranks out (README.md, "Security"): every rank's listener, during formation and
// after, keeps at most `max_pending` handshakes in progress; when one more arrives, one of those
// is shed instead of the newcomer being refused. Connections that have not even sent their hello
// (silent and slow ones) are shed before any that is being authenticated. Of the addresses with
// one of that stage, the one with the most handshakes pending pays (a flood from one host before
// anyone else), its oldest of that stage; between addresses with as many, the one whose oldest is
// older, so a flood of one connection per address sheds its own oldest, not a rank that is
// authenticating. A rank whose handshake is shed all the same retries until its connect deadline.
//
// Connections dropped before they authenticated are counted by reason and reported as one
// summary line per interval (DropReport), not one line each, so a flood cannot fill the log.
//
// Thread-safety: neither class is thread-safe; the io thread owns both.
#ifndef REEL_PLUGINS_TCP_SRC_ADMISSION_H_
#define REEL_PLUGINS_TCP_SRC_ADMISSION_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <string>

namespace reel::tcp {

class PendingHandshakes {
 public:
  enum class Stage { kAwaitingHello, kAuthenticating };
  struct Entry {
    std::string address;  // the source address, without port
    Stage stage = Stage::kAwaitingHello;
    bool shed = false;           // chosen by Shed(): its handshake ends as "shed", not as a failure
    void* connection = nullptr;  // the caller's handle (its socket); never dereferenced here
  };
  using Handle = std::list<Entry>::iterator;

  explicit PendingHandshakes(int max_pending) : max_pending_(max_pending) {}

  // Starts tracking a new handshake. REQUIRES: !Full() (call Shed() first).
  Handle Add(std::string address, void* connection);
  void Remove(Handle h);
  bool Full() const { return size() >= max_pending_; }
  // Chooses the handshake to shed (see above), marks it shed and stops counting it, so that a
  // newcomer fits; its connection is for the caller to close (its handshake then ends and
  // Remove()s it as usual). Null when nothing is pending.
  void* Shed();
  int size() const { return static_cast<int>(entries_.size()) - shed_; }
  int max_pending() const { return max_pending_; }
  // Every tracked connection, shed or not (to close them all when the rank ends).
  const std::list<Entry>& entries() const { return entries_; }

 private:
  const int max_pending_;
  std::list<Entry> entries_;  // oldest first
  int shed_ = 0;              // entries marked shed whose handshake has not ended yet
};

// Why a connection was dropped before it authenticated.
enum class DropReason {
  kShed,            // over the bound of pending handshakes
  kTimedOut,        // no complete handshake within the handshake deadline
  kNotTheProtocol,  // bytes that are no handshake (bad magic, version, fields)
  kFailedAuth,      // a MAC that does not prove the secret
  kHungUp,          // closed or reset by the peer mid-handshake
  kLocalFailure,    // this rank failed: accept() (e.g. out of descriptors), random, HMAC
  kCount,
};

class DropReport {
 public:
  // Counts one drop; `from` is the source ("host:port" or empty), `detail` what was seen.
  // True when this is the first drop since the last Take(): time to arm the interval's timer.
  bool Add(DropReason reason, const std::string& from, const std::string& detail);
  int64_t total() const { return total_; }
  // One line for everything counted since the last Take() (empty if nothing), then starts over:
  // "dropped 3 connection(s) that did not authenticate in the last 10 s (from 10.0.0.4: 3): 1 not
  // the protocol (handshake hello: bad magic ...), ...". `handshake_ms`, `max_pending` describe
  // the deadline and the bound.
  std::string Take(std::chrono::milliseconds interval, int64_t handshake_ms, int max_pending);

 private:
  int64_t total_ = 0;
  std::array<int64_t, static_cast<size_t>(DropReason::kCount)> count_{};
  std::array<std::string, static_cast<size_t>(DropReason::kCount)> last_{};
  std::map<std::string, int64_t> by_address_;
};

}  // namespace reel::tcp

#endif  // REEL_PLUGINS_TCP_SRC_ADMISSION_H_

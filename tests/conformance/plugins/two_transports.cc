// A test plugin with two transports, `refusing_a` and `refusing_b`, whose Connect always fails
// with an error naming the transport: `reel plugins check` must run the transport conformance
// suite over each of them (a plugin may register several), and each one's failures name it.
#include <memory>
#include <string>

#include "reel/plugin.h"

namespace {

class RefusingTransport final : public reel::Transport {
 public:
  explicit RefusingTransport(std::string name) : name_(std::move(name)) {}
  reel::Result<std::unique_ptr<reel::Communicator>> Connect(const reel::TransportContext& ctx,
                                                            reel::Deadline) override {
    return reel::UnavailableError(name_ + " refuses every connection (rank " +
                                  std::to_string(ctx.rank) + ")");
  }

 private:
  std::string name_;
};

reel::Status Register(reel::Registrar& r) {
  for (const char* name : {"refusing_a", "refusing_b"}) {
    REEL_RETURN_IF_ERROR(r.Add<reel::Transport>(
        {name, "a transport whose Connect always fails", {}},
        [name](const reel::Options&) -> reel::Result<std::unique_ptr<reel::Transport>> {
          return std::unique_ptr<reel::Transport>(new RefusingTransport(name));
        }));
  }
  return reel::Status::Ok();
}

}  // namespace

REEL_PLUGIN("two_transports", "1.0.0", "Two transports that refuse every connection", Register)

// The Python module's shared pieces: the one Host of the interpreter (plugins from the same search
// path as the `reel` command), and reel Status → Python exception (reel/errors.py maps the codes).
//
// Thread-safety: GetHost() creates the host on first use under a lock; ThrowIfError may be called
// without the GIL (the exception is translated once pybind11 holds it again).
#ifndef REEL_PYTHON_HOST_H_
#define REEL_PYTHON_HOST_H_

#include <stdexcept>
#include <string>
#include <vector>

#include "reel/core/host.h"
#include "reel/status.h"

namespace reel::python {

// A reel error on its way to Python: the code's name ("NOT_FOUND") and the message the command
// would print after "reel COMMAND: CODE: ".
class StatusError : public std::runtime_error {
 public:
  explicit StatusError(const Status& s)
      : std::runtime_error(s.message()), code_(StatusCodeName(s.code())) {}
  const std::string& code() const { return code_; }

 private:
  std::string code_;
};

inline void ThrowIfError(const Status& s) {
  if (!s.ok()) throw StatusError(s);
}
template <typename T>
T ValueOrThrow(Result<T> r) {
  ThrowIfError(r.status());
  return std::move(*r);
}

// The interpreter's host. Plugins: `plugin_dirs` of the first call (reel.configure), then
// REEL_PLUGIN_PATH, then lib/reel/plugins beside libreel.so — where the command finds them
// (<prefix>/bin/../lib/reel/plugins), found from the library because the executable is python.
// Storage options from REEL_STORAGE_<SCHEME>_<OPTION> variables, as the command reads them.
core::Host& GetHost(const std::vector<std::string>& plugin_dirs = {});
// Whether the host exists yet (reel.configure must come first).
bool HostCreated();

}  // namespace reel::python

#endif  // REEL_PYTHON_HOST_H_

// Test support for the s3 plugin: a real s3rver (npm) on a free loopback port, and a tiny fake
// HTTP server for faults a real server will not produce on demand.
//
// S3rverProcess launches `node <REEL_S3RVER_DIR>/node_modules/s3rver/bin/s3rver.js` with a fresh
// temporary directory and a bucket, waits until it listens, and kills it in Stop()/destructor.
// SharedS3rver() is one instance for the whole test binary, started on first use and stopped by
// a gtest Environment at exit. If s3rver is missing the start fails with the install command.
//
// FakeHttpServer answers each request on 127.0.0.1 with whatever its handler returns (raw HTTP
// bytes) and closes the connection. Thread-safety: requests() may be read while it runs.
#ifndef REEL_PLUGINS_S3_TESTS_S3_TEST_ENV_H_
#define REEL_PLUGINS_S3_TESTS_S3_TEST_ENV_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "reel/status.h"
#include "s3_config.h"

namespace reel::s3::testing {

inline constexpr char kBucket[] = "reel-test";

class S3rverProcess {
 public:
  S3rverProcess() = default;
  ~S3rverProcess() { Stop(); }
  S3rverProcess(const S3rverProcess&) = delete;
  S3rverProcess& operator=(const S3rverProcess&) = delete;

  // Starts the server with bucket kBucket. FailedPrecondition (with the fix) if not installed.
  Status Start();
  // Kills the server (SIGKILL) and deletes its data.
  void Stop();
  // Kills the server but keeps its data and port, so Restart() brings the same objects back at
  // the same endpoint: an outage, not a new server.
  void Kill();
  Status Restart();
  bool running() const { return pid_ > 0; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

  // A config for this server: its endpoint, path addressing, s3rver's built-in credentials and
  // short retry delays so fault tests stay fast.
  S3Config Config() const;

 private:
  Status Launch(int port);  // starts node on dir_ and `port` (0: any free port)

  pid_t pid_ = -1;
  int port_ = 0;
  std::string dir_;
};

// Where the tests look for s3rver's entry script.
std::string S3rverEntry();

// The binary-wide server; started on first call. Returns nullptr and sets *error on failure.
S3rverProcess* SharedS3rver(Status* error);

struct HttpRequestSeen {
  std::string method, target, body;
  std::map<std::string, std::string> headers;  // lower-case names
};

class FakeHttpServer {
 public:
  using Handler = std::function<std::string(const HttpRequestSeen&)>;
  explicit FakeHttpServer(Handler handler);
  ~FakeHttpServer();
  int port() const { return port_; }
  std::vector<HttpRequestSeen> requests() const;

 private:
  void Serve();
  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::vector<HttpRequestSeen> requests_;
  std::thread thread_;
};

// A full HTTP response with Content-Length and Connection: close.
std::string HttpResponse(int status, const std::string& body,
                         const std::vector<std::string>& extra_headers = {});

// Runs a shell command; returns its exit status (and output in *out when given).
int RunCommand(const std::string& command, std::string* out = nullptr);

// "s3://reel-test/<key>".
inline std::string Uri(const std::string& key) {
  return "s3://" + std::string(kBucket) + "/" + key;
}
// `n` bytes of a seeded pseudo-random stream.
std::string RandomBytes(size_t n, uint32_t seed);

}  // namespace reel::s3::testing

#endif  // REEL_PLUGINS_S3_TESTS_S3_TEST_ENV_H_

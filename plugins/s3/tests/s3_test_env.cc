#include "s3_test_env.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <regex>
#include <sstream>

namespace reel::s3::testing {

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

std::string S3rverEntry() {
  const char* dir = std::getenv("REEL_S3RVER_DIR");
  std::string base = dir && *dir ? dir : REEL_S3RVER_DIR;
  return base + "/node_modules/s3rver/bin/s3rver.js";
}

Status S3rverProcess::Start() {
  std::string entry = S3rverEntry();
  if (!std::filesystem::exists(entry))
    return FailedPreconditionError(
        "s3rver is not installed at " + entry +
        "; run scripts/install-s3rver.sh (or set REEL_S3RVER_DIR to its install folder)");
  // Unfixed, s3rver answers a PUT before the bytes are on disk and ignores "bytes=0-0": the
  // tests would flake under load instead of failing here (scripts/s3rver-fixes.js).
  const std::string store = std::filesystem::path(entry).parent_path().parent_path().string() +
                            "/lib/stores/filesystem.js";
  std::ifstream first_line_of(store);
  std::string first_line;
  std::getline(first_line_of, first_line);
  if (first_line != "// reel: scripts/s3rver-fixes.js applied")
    return FailedPreconditionError(
        "s3rver at " + entry +
        " lacks reel's fixes for its read-after-write bugs; run "
        "scripts/install-s3rver.sh (it applies scripts/s3rver-fixes.js)");
  char tmpl[] = "/tmp/reel-s3rver-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return InternalError("mkdtemp failed");
  dir_ = tmpl;
  std::filesystem::create_directory(dir_ + "/data");
  return Launch(0);
}

Status S3rverProcess::Restart() {
  if (dir_.empty()) return FailedPreconditionError("s3rver was never started");
  if (pid_ > 0) return FailedPreconditionError("s3rver is running");
  return Launch(port_);
}

Status S3rverProcess::Launch(int port) {
  const std::string entry = S3rverEntry();
  const std::string port_arg = std::to_string(port);
  std::string log = dir_ + "/s3rver.log";
  // A restart must not find the previous run's "listening" line.
  std::filesystem::remove(log);
  std::string data = dir_ + "/data";  // built before fork: no allocation in the child
  pid_t pid = fork();
  if (pid < 0) return InternalError("fork failed");
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    // s3rver's continuation tokens use DES, which OpenSSL 3 keeps in its legacy provider.
    execlp("node", "node", "--openssl-legacy-provider", entry.c_str(), "-d", data.c_str(), "-a",
           "127.0.0.1", "-p", port_arg.c_str(), "--silent", "--configure-bucket", kBucket,
           static_cast<char*>(nullptr));
    _exit(127);
  }
  pid_ = pid;
  // s3rver prints "S3rver listening on 127.0.0.1:PORT" once it accepts requests.
  std::regex listening("listening on 127\\.0\\.0\\.1:([0-9]+)");
  for (int i = 0; i < 600; ++i) {  // up to 30 s on a loaded machine
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    std::smatch m;
    std::string text = ss.str();
    if (std::regex_search(text, m, listening)) {
      port_ = std::stoi(m[1]);
      return Status::Ok();
    }
    int wstatus = 0;
    if (waitpid(pid_, &wstatus, WNOHANG) == pid_) {
      pid_ = -1;
      return UnavailableError("s3rver exited before listening; its output: " + text);
    }
    usleep(50000);
  }
  Stop();
  return DeadlineExceededError("s3rver did not start listening within 30 s");
}

void S3rverProcess::Kill() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

void S3rverProcess::Stop() {
  Kill();
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    dir_.clear();
  }
}

S3Config S3rverProcess::Config() const {
  S3Config c;
  c.endpoint = endpoint();
  c.region = "us-east-1";
  c.access_key_id = "S3RVER";  // s3rver's built-in account
  c.secret_access_key = "S3RVER";
  c.virtual_addressing = false;
  c.max_retries = 2;
  c.retry_base_ms = 1;
  c.retry_max_ms = 5;
  c.connect_timeout_ms = 2000;
  c.timeout_ms = 10000;
  return c;
}

namespace {
std::unique_ptr<S3rverProcess>& SharedSlot() {
  static std::unique_ptr<S3rverProcess> slot;
  return slot;
}

// Stops the shared server when the test binary finishes.
class S3rverEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { SharedSlot().reset(); }
};
[[maybe_unused]] ::testing::Environment* const kEnv =
    ::testing::AddGlobalTestEnvironment(new S3rverEnvironment);
}  // namespace

S3rverProcess* SharedS3rver(Status* error) {
  static std::mutex mu;
  static Status start_error;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = SharedSlot();
  if (!slot && start_error.ok()) {
    auto server = std::make_unique<S3rverProcess>();
    start_error = server->Start();
    if (start_error.ok()) slot = std::move(server);
  }
  *error = start_error;
  return slot.get();
}

FakeHttpServer::FakeHttpServer(Handler handler) : handler_(std::move(handler)) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  listen(listen_fd_, 16);
  socklen_t len = sizeof(addr);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { Serve(); });
}

FakeHttpServer::~FakeHttpServer() {
  stop_ = true;
  thread_.join();
  close(listen_fd_);
}

std::vector<HttpRequestSeen> FakeHttpServer::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

void FakeHttpServer::Serve() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 20) <= 0) continue;
    int fd = accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) continue;
    std::string data;
    char buf[65536];
    size_t head_end;
    while ((head_end = data.find("\r\n\r\n")) == std::string::npos) {
      ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      data.append(buf, n);
    }
    if (head_end == std::string::npos) {
      close(fd);
      continue;
    }
    HttpRequestSeen req;
    std::istringstream head(data.substr(0, head_end));
    std::string line;
    std::getline(head, line);
    std::istringstream first(line);
    first >> req.method >> req.target;
    while (std::getline(head, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      size_t v = line.find_first_not_of(' ', colon + 1);
      req.headers[name] = v == std::string::npos ? "" : line.substr(v);
    }
    size_t want =
        req.headers.count("content-length") ? std::stoul(req.headers["content-length"]) : 0;
    req.body = data.substr(head_end + 4);
    while (req.body.size() < want) {
      ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      req.body.append(buf, n);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(req);
    }
    std::string response = handler_(req);
    for (size_t sent = 0; sent < response.size();) {
      ssize_t n = send(fd, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += n;
    }
    close(fd);
  }
}

std::string HttpResponse(int status, const std::string& body,
                         const std::vector<std::string>& extra_headers) {
  std::string out = "HTTP/1.1 " + std::to_string(status) +
                    " X\r\nContent-Length: " + std::to_string(body.size()) +
                    "\r\nConnection: close\r\n";
  for (const auto& h : extra_headers) out += h + "\r\n";
  return out + "\r\n" + body;
}

int RunCommand(const std::string& command, std::string* out) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) text.append(buf, n);
  int rc = pclose(pipe);
  if (out) *out = text;
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace reel::s3::testing

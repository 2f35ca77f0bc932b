// s3_read benchmark (docs/benchmarks.md): read one object from a local S3 server on loopback with
// reel's s3 storage and with the AWS CLI (`aws s3 cp ... -` and to a tmpfs file), alternating in
// one run, several repetitions, medians; memcpy of the same size is the ceiling.
//
//   s3_read --endpoint http://127.0.0.1:PORT [--bucket bench] [--size_mib 256] [--reps 5]
//           [--out bench/out] [--command "how this was run"]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "s3_storage.h"

namespace {

using reel::bench::Clock;
using reel::bench::Median;
using reel::bench::Seconds;

std::string Arg(const std::map<std::string, std::string>& args, const std::string& k,
                const std::string& def) {
  auto it = args.find(k);
  return it == args.end() ? def : it->second;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "s3_read: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i + 1 < argc; i += 2) args[std::string(argv[i]).substr(2)] = argv[i + 1];
  const std::string endpoint = Arg(args, "endpoint", "");
  if (endpoint.empty()) return Fail("--endpoint is required");
  const std::string bucket = Arg(args, "bucket", "bench");
  const size_t size = std::stoull(Arg(args, "size_mib", "256")) << 20;
  const int reps = std::stoi(Arg(args, "reps", "5"));
  const std::string out_dir = Arg(args, "out", "bench/out");
  const std::string key = "s3_read/object.bin";
  const std::string uri = "s3://" + bucket + "/" + key;

  reel::s3::S3Config config;
  config.endpoint = endpoint;
  config.access_key_id = "S3RVER";
  config.secret_access_key = "S3RVER";
  auto storage = reel::s3::MakeS3Storage(config);
  if (!storage.ok()) return Fail(storage.status().ToString());

  // The object: random bytes, uploaded by reel (multipart).
  std::vector<char> source(size);
  std::mt19937_64 rng(42);
  for (size_t i = 0; i + 8 <= size; i += 8) {
    uint64_t v = rng();
    std::memcpy(&source[i], &v, 8);
  }
  reel::Status put = reel::WriteAll(**storage, uri, std::string_view(source.data(), source.size()));
  if (!put.ok()) return Fail(put.ToString());

  const std::string aws =
      "AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER "
      "AWS_DEFAULT_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null "
      "AWS_SHARED_CREDENTIALS_FILE=/dev/null aws --endpoint-url " +
      endpoint + " s3 cp " + uri;
  const std::string shm_file = "/dev/shm/reel-s3-read-bench.bin";
  std::vector<char> dest(size, 1), reel_buf(size, 1);  // touched: no page faults in the timing
  // One plain GET with the curl tool: what the server streams on a single connection.
  const std::string curl_get =
      "curl -sf -o /dev/null --aws-sigv4 aws:amz:us-east-1:s3 -u S3RVER:S3RVER -H "
      "'x-amz-content-sha256: "
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' " +
      endpoint + "/" + bucket + "/" + key;
  std::vector<double> t_memcpy, t_reel, t_scan, t_aws_stdout, t_aws_file, t_curl;
  for (int r = 0; r < reps; ++r) {
    auto a = Clock::now();
    std::memcpy(dest.data(), source.data(), size);
    t_memcpy.push_back(Seconds(a, Clock::now()));

    // Alternate who goes first so neither always meets a warm server.
    for (int turn = 0; turn < 2; ++turn) {
      if ((turn == 0) == (r % 2 == 0)) {
        auto t0 = Clock::now();
        auto fresh = reel::s3::MakeS3Storage(config);  // new connections every repetition
        auto file = (*fresh)->OpenRead(uri);
        if (!file.ok()) return Fail(file.status().ToString());
        auto n = (*file)->Read(0, std::as_writable_bytes(std::span<char>(reel_buf)));
        auto t1 = Clock::now();
        if (!n.ok()) return Fail(n.status().ToString());
        if (*n != size || std::memcmp(reel_buf.data(), source.data(), size) != 0)
          return Fail("reel read the wrong bytes");
        t_reel.push_back(Seconds(t0, t1));
        // The same object as a TFRecord scan sees it: 64 KiB sequential reads, served by the
        // read-ahead blocks with the next ranges already in flight.
        auto s0 = Clock::now();
        auto scan_storage = reel::s3::MakeS3Storage(config);
        auto scan = (*scan_storage)->OpenRead(uri);
        if (!scan.ok()) return Fail(scan.status().ToString());
        for (size_t off = 0; off < size; off += 64 << 10) {
          auto m = (*scan)->Read(
              off, std::as_writable_bytes(std::span<char>(reel_buf.data() + off, 64 << 10)));
          if (!m.ok()) return Fail(m.status().ToString());
        }
        t_scan.push_back(Seconds(s0, Clock::now()));
        if (std::memcmp(reel_buf.data(), source.data(), size) != 0)
          return Fail("reel's sequential scan read the wrong bytes");
      } else {
        auto t0 = Clock::now();
        if (std::system((aws + " - > /dev/null").c_str()) != 0) return Fail("aws s3 cp - failed");
        auto t1 = Clock::now();
        if (std::system((aws + " " + shm_file + " > /dev/null").c_str()) != 0)
          return Fail("aws s3 cp to a file failed");
        auto t2 = Clock::now();
        std::remove(shm_file.c_str());
        auto c0 = Clock::now();
        if (std::system(curl_get.c_str()) != 0) return Fail("curl GET failed");
        auto c1 = Clock::now();
        t_aws_stdout.push_back(Seconds(t0, t1));
        t_aws_file.push_back(Seconds(t1, t2));
        t_curl.push_back(Seconds(c0, c1));
      }
    }
    std::fprintf(stderr,
                 "rep %d: memcpy %.3fs reel %.3fs scan %.3fs aws(-) %.3fs aws(file) %.3fs "
                 "curl %.3fs\n",
                 r, t_memcpy.back(), t_reel.back(), t_scan.back(), t_aws_stdout.back(),
                 t_aws_file.back(), t_curl.back());
  }

  const double mib = static_cast<double>(size) / (1 << 20);
  const double gb = static_cast<double>(size) / 1e9;
  double scan_s = Median(t_scan), curl_s = Median(t_curl);
  double reel_s = Median(t_reel), aws_s = Median(t_aws_stdout), awsf_s = Median(t_aws_file),
         memcpy_s = Median(t_memcpy);
  double best_aws = std::min(aws_s, awsf_s);
  char json[4096];
  std::snprintf(json, sizeof(json),
                "{\n  \"benchmark\": \"s3_read\",\n  \"object_mib\": %.0f,\n  \"reps\": %d,\n"
                "  \"read_ahead\": %lld,\n  \"parallel_ranges\": %lld,\n"
                "  \"reel_s\": %.4f,\n  \"reel_gbps\": %.3f,\n"
                "  \"reel_scan_64k_s\": %.4f,\n  \"reel_scan_64k_gbps\": %.3f,\n"
                "  \"aws_cli_stdout_s\": %.4f,\n  \"aws_cli_stdout_gbps\": %.3f,\n"
                "  \"aws_cli_file_s\": %.4f,\n  \"aws_cli_file_gbps\": %.3f,\n"
                "  \"curl_single_get_s\": %.4f,\n  \"curl_single_get_gbps\": %.3f,\n"
                "  \"memcpy_s\": %.4f,\n  \"memcpy_gbps\": %.3f,\n"
                "  \"reel_vs_best_aws_cli\": %.3f,\n  \"reel_scan_vs_best_aws_cli\": %.3f,\n  "
                "\"reel_vs_memcpy\": %.4f,\n"
                "  \"command\": \"%s\"\n}\n",
                mib, reps, static_cast<long long>(config.read_ahead),
                static_cast<long long>(config.parallel_ranges), reel_s, gb / reel_s, scan_s,
                gb / scan_s, aws_s, gb / aws_s, awsf_s, gb / awsf_s, curl_s, gb / curl_s, memcpy_s,
                gb / memcpy_s, best_aws / reel_s, best_aws / scan_s, memcpy_s / reel_s,
                Arg(args, "command", "").c_str());
  std::filesystem::create_directories(out_dir);
  std::ofstream(out_dir + "/s3_read.json") << json;
  std::ofstream md(out_dir + "/s3_read.md");
  md << "# s3_read: one " << mib << " MiB object from a local s3rver (loopback)\n\n"
     << "Median of " << reps << " alternating repetitions, same run. GB/s = 1e9 bytes/s.\n\n"
     << "| reader | seconds | GB/s | its time / reel's time |\n|---|---|---|---|\n";
  char row[256];
  auto line = [&](const char* name, double s) {
    std::snprintf(row, sizeof(row), "| %s | %.3f | %.3f | %.2fx |\n", name, s, gb / s, s / reel_s);
    md << row;
  };
  line("reel s3 storage (ReadAll: HEAD + parallel ranged GETs)", reel_s);
  line("reel s3 storage, sequential 64 KiB reads (read-ahead path)", scan_s);
  line("`aws s3 cp s3://... -` > /dev/null", aws_s);
  line("`aws s3 cp s3://... /dev/shm/file`", awsf_s);
  line("`curl` tool, one plain GET (what s3rver streams on one connection)", curl_s);
  line("memcpy of the same bytes (hardware ceiling)", memcpy_s);
  md << "\nCommand: `" << Arg(args, "command", "") << "`\n";
  std::printf("%s", json);
  return 0;
}

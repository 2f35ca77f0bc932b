// The capacity model behind `reel plan` (docs/capacity.md, "The model"): the time of
// one epoch of a dataset on N nodes, and its parts, from rates measured on one node
// (machine_profile.h). Per training rank (one per node, its cores the rank's threads):
//   share   = the busiest rank's videos: the tfrecord source gives ranks whole files (file i to
//             rank i mod R) when F >= R, so ceil(F / R) x V / F; with fewer files V / R.
//   cpu     = share x (decode + step core-seconds per example) / cores (they share the cores);
//             the step's measured split (forward, backward, update) parts it into step
//             (forward + backward) and update (the clip and the rule's pass).
//   read    = the share's bytes / min(storage rate, node link); overlapped with the steps, as is
//             the prefetch thread's own decoding (one thread decodes).
//   sync    : a step's exchange X = 2(N-1)/N x the wire's bytes (the gradient G, half with
//             compression) over the slower of the link's payload rate and the transport's,
//             + 2(N-1) latencies per bucket, + with compression a conversion pass of 3G bytes at
//             the copy rate. In buckets (bucket_bytes > 0, not sharded) it overlaps backward:
//             exposed = max(X - backward, the last bucket's X); else all of X is exposed.
//             Sharded (zero_stage 1): the update / N, the same bytes, nothing overlapped. So
//             epoch = max(read, prefetch, cpu + exposed exchange) + evaluation + checkpoints.
//   async   : S servers, W = N - S workers; a worker step is cpu + one pipelined push+pull (or
//             the larger with `overlap`); the job's steps per second are capped by the servers'
//             links (S x link / G) and update rules (S x apply rate / P), shared by the workers
//             still running (each the lesser of its own rate and cap / k), so the busiest
//             worker's last steps run alone.
//   fill    = before an epoch's first batch a rank's source reads and parses min(shuffle buffer +
//             batch, its share) records on one thread with nothing to overlap: their count x the
//             profile's wait per record;
//   evaluation = the eval videos decoded and forwarded on every rank's share;
//   checkpoints = parameters and the rule's state written by one rank.
// Every rate is the profile's, scaled linearly by cores and frames; Plan::assumptions lists them.
//
// Thread-safety: pure functions.
#ifndef REEL_CORE_SRC_PLAN_CAPACITY_MODEL_H_
#define REEL_CORE_SRC_PLAN_CAPACITY_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "reel/status.h"

namespace reel::core::plan {

enum class Storage { kLocal, kS3 };

struct Dataset {
  int64_t videos = 0;      // training videos in one epoch
  double bytes = 0;        // their TFRecord bytes
  double mean_frames = 0;  // frames the model sees per video on average; 0: video-level
  int64_t files = 0;       // the files they are in (equal sizes assumed); 0: unknown, even shares
  Storage storage = Storage::kLocal;
  int64_t eval_videos = 0;  // evaluated once per epoch
};

// The share of an Ethernet link's nominal rate that TCP payload gets at a given MTU: per packet
// MTU - 52 bytes of payload (IPv4 20, TCP 20, its timestamps 12) in MTU + 38 on the wire (Ethernet
// header 14, FCS 4, preamble 8, inter-frame gap 12): 94.1% at 1500, 99.0% at 9001.
constexpr double PayloadFraction(double mtu) { return (mtu - 52) / (mtu + 38); }

struct Cluster {
  int nodes = 1;
  double cores_per_node = 1;                    // fractional for hosts that share a machine's cores
  double link_bytes_per_s = 0;                  // each node's network link, each direction, nominal
  double link_payload = PayloadFraction(1500);  // the share of it that TCP payload gets
  double s3_bytes_per_s = 0;                    // each node's S3 bandwidth (Storage::kS3)
  int s3_connections = 8;                       // reads in flight per node
  double link_latency_s = 50e-6;  // one way between two nodes, beside the transport's own
};

struct Training {
  bool async = false;    // async_sgd, else sync (ring allreduce)
  int servers = 1;       // async: server nodes (the others train)
  bool overlap = false;  // async: push+pull overlaps the next step
  int64_t batch_per_rank = 32;
  // Records the data source reads before its first batch of an epoch beyond the batch itself
  // (the tfrecord source's shuffle_buffer; 0: a batch's).
  int64_t shuffle_buffer = 0;
  double params = 0;                  // float32 parameters
  double state_floats_per_param = 2;  // the update rule's state (adam: 2)
  int64_t checkpoints_per_epoch = 0;
  // sync (docs/distributed.md): the gradient's buckets reduced while backward runs, this many
  // bytes each (0: the whole gradient after backward); the sharded update (zero_stage 1); a
  // 16-bit gradient on the wire (bf16 or fp16).
  double bucket_bytes = 4 * 1048576.0;
  bool sharded_update = false;
  bool compressed = false;
};

// Rates of one node, as machine_profile.h stores them (per second).
struct Rates {
  double cores = 1;                        // cores of the node they were measured on
  double decode_bytes_per_core = 0;        // TFRecord bytes read and parsed by one core
  double decode_video_bytes_per_core = 0;  // the same for video-level records (profiles only)
  double step_examples_per_core = 0;       // training steps' examples per core (all cores busy)
  double forward_examples_per_core = 0;    // evaluation's
  double frames = 0;                       // the frames per video the step rates were measured at
  double reduce_bytes = 0;                 // the transport's allreduce bus bandwidth, no link limit
  double transfer_bytes = 0;               // its point-to-point rate (push and pull), no link limit
  double message_latency_s = 0;            // one message of the transport, one way
  double apply_params_per_core = 0;        // the update rule's parameters per core
  double startup_seconds = 0;  // a run's model and optimizer setup and cold first step, once
  // The data source's wait for an epoch's first batch per record read by then (ModelRates).
  double fill_seconds_per_record = 0;
  double disk_read_bytes = 0;
  double disk_write_bytes = 0;
  double s3_bytes_per_connection = 0;
  double memory_bytes = 0;  // one thread's copy: bytes read + written per second
  // The training step's split (its shares of the step's time): backward, and the update (the
  // clip and the update rule's pass); the forward and loss are the rest. < 0: not measured (a
  // profile of an older reel), so the update stays in the step and overlap cannot be planned.
  double backward_fraction = -1;
  double update_fraction = -1;
};

struct Part {
  std::string name;    // "reading", "decoding", "step", "update", "exchange", ...
  double seconds = 0;  // busy time over the epoch, per node
};

struct Plan {
  double epoch_seconds = 0;
  std::vector<Part> parts;    // per node; see the header comment for how they combine
  std::string bottleneck;     // the part that sets the epoch time
  int64_t steps = 0;          // of the busiest training rank (sync) or worker (async)
  double examples_per_s = 0;  // of the whole job
  double node_hours = 0;
  double scaling_efficiency = 0;  // examples/s over N x one node's, alone, without exchange
  std::vector<std::string> assumptions;
};

// The plan, or InvalidArgument naming the input that makes it impossible (no nodes, a link of 0,
// fewer videos than one batch per rank, async with no worker, a rate the profile lacks, a step
// without its split where overlap or the sharded update needs it: measure again).
Result<Plan> PlanEpoch(const Dataset& data, const Cluster& cluster, const Training& training,
                       const Rates& rates);

// "1.5TB", "750GB", "4GiB", "1e9" -> bytes; "750Mbit/s", "10Gbit/s", "100MB/s" -> bytes/s.
// Decimal prefixes are powers of 1000, binary (KiB...) of 1024. InvalidArgument otherwise.
Result<double> ParseBytes(const std::string& text);
Result<double> ParseRate(const std::string& text);

}  // namespace reel::core::plan

#endif  // REEL_CORE_SRC_PLAN_CAPACITY_MODEL_H_

// A search over the ranks of a Communicator: rank 0 schedules (the Executor below), every other
// rank runs RunTuneWorker: it waits for a TuneWork, runs the trial with the same runner threads
// use, and answers with a TuneReport. A worker asks for more by answering, so a slow trial holds
// up nobody. Messages are proto/tune.proto's TuneWork and TuneReport on two user tags.
//
// A worker that dies (Unavailable from its peer link) fails the trial it was running, naming its
// rank, and leaves the pool; the search goes on with the others and fails only when none is left.
// The workdir must be one filesystem for all ranks (one machine, or a shared mount): rank 0
// prepares each trial's folder and a promoted trial reads its previous rung's checkpoint there.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "executor.h"
#include "train/thread_budget.h"
#include "tune.pb.h"

namespace reel::core::tune {
namespace {

constexpr int kTagWork = 7001;    // rank 0 → worker: TuneWork
constexpr int kTagReport = 7002;  // worker → rank 0: TuneReport
// How often blocked receives wake up to look at the stop flag; peers that die are reported by
// the transport itself (reset, EOF or its heartbeat) within its own timeout.
constexpr auto kPoll = std::chrono::milliseconds(500);

std::span<const std::byte> Bytes(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

template <typename Proto>
Result<Proto> Parse(const Message& m, const char* what) {
  Proto p;
  if (!p.ParseFromArray(m.payload.data(), static_cast<int>(m.payload.size())))
    return DataLossError(std::string("rank ") + std::to_string(m.source) + " sent a " + what +
                         " that does not parse (" + std::to_string(m.payload.size()) + " bytes)");
  return p;
}

class DistributedExecutor : public Executor {
 public:
  explicit DistributedExecutor(Communicator& comm) : comm_(comm) {
    for (int r = 1; r < comm.size(); ++r) {
      free_.push_back(r);
      listeners_.emplace_back([this, r] { Listen(r); });
    }
  }

  ~DistributedExecutor() override {
    // The live workers are read under the lock: a listener may still be recording one as dead.
    // The sends happen after it, so no listener waits on the lock across the network.
    std::vector<int> live;
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
      for (int r = 1; r < comm_.size(); ++r)
        if (!dead_.count(r)) live.push_back(r);
    }
    config::TuneWork stop;
    stop.set_stop(true);
    const std::string bytes = stop.SerializeAsString();
    for (int r : live) (void)comm_.Send(r, kTagWork, Bytes(bytes), DeadlineIn(kPoll * 4));
    for (auto& t : listeners_) t.join();
  }

  int slots() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(comm_.size() - 1 - dead_.size());
  }

  // Sends the job to a free worker. A worker can die between the scheduler counting it (slots())
  // and this call, so there may be none free: the job then waits for the next worker that
  // finishes, or fails at once when no worker is left.
  void Start(TrialJob job) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (free_.empty()) {
      if (running_.empty()) {
        FailLocked(std::move(job), -1, NoWorkerLeft());
      } else {
        queued_.push_back(std::move(job));
      }
      return;
    }
    const int worker = free_.front();
    free_.pop_front();
    Assign(worker, std::move(job), lock);
  }

  Completion Wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !done_.empty(); });
    Completion c = std::move(done_.front());
    done_.pop_front();
    return c;
  }

 private:
  struct Running {
    int64_t id;
    TrialJob job;
    std::chrono::steady_clock::time_point start;  // sent to its worker; the trial's wall time
  };

  // One thread per worker rank: its reports, or the news that it is gone.
  void Listen(int worker) {
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (closing_ || dead_.count(worker)) return;
      }
      Result<Message> m = comm_.Recv(worker, kTagReport, DeadlineIn(kPoll));
      if (!m.ok()) {
        if (m.status().code() == StatusCode::kDeadlineExceeded) continue;
        WorkerGone(worker, m.status());
        return;
      }
      Result<config::TuneReport> report = Parse<config::TuneReport>(*m, "trial report");
      std::unique_lock<std::mutex> lock(mu_);
      auto it = running_.find(worker);
      if (it == running_.end() || !report.ok() || report->job() != it->second.id) continue;
      Completion c;
      c.job = std::move(it->second.job);
      c.worker = worker;
      c.run = FromReport(*report);
      c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - it->second.start)
                      .count();
      running_.erase(it);
      done_.push_back(std::move(c));
      cv_.notify_one();
      if (queued_.empty()) {
        free_.push_back(worker);
        continue;
      }
      TrialJob next = std::move(queued_.front());
      queued_.pop_front();
      Assign(worker, std::move(next), lock);
    }
  }

  static Result<TrialRun> FromReport(const config::TuneReport& r) {
    if (!r.ok()) return Status(static_cast<StatusCode>(r.code()), r.error());
    TrialRun run;
    run.eval = {r.gap(), r.hit_at_1(), r.perr(), r.map(), r.videos()};
    run.steps = r.steps();
    run.last_loss = r.last_loss();
    run.interrupted = r.interrupted();
    return run;
  }

  // Registers `job` as running on `worker` and sends it (unlocking `lock` for the send).
  void Assign(int worker, TrialJob job, std::unique_lock<std::mutex>& lock) {
    const int64_t id = next_id_++;
    config::TuneWork work;
    work.set_job(id);
    work.set_config_text(job.request.config_text);
    work.set_dir(job.request.dir);
    work.set_resume(job.request.resume);
    work.set_threads(job.request.threads);
    running_[worker] = {id, std::move(job), std::chrono::steady_clock::now()};
    lock.unlock();
    Status sent =
        comm_.Send(worker, kTagWork, Bytes(work.SerializeAsString()), DeadlineIn(kPoll * 20));
    if (!sent.ok()) WorkerGone(worker, sent);
  }

  // A worker is gone: its trial (if any) fails naming it, whether this is the first news of its
  // death or a later one (a send to it that failed after its listener saw it go).
  void WorkerGone(int worker, const Status& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (dead_.insert(worker).second)
      last_death_ = "worker rank " + std::to_string(worker) + " died: " + why.ToString();
    std::erase(free_, worker);
    if (auto it = running_.find(worker); it != running_.end()) {
      TrialJob job = std::move(it->second.job);
      running_.erase(it);
      FailLocked(std::move(job), worker,
                 UnavailableError("worker rank " + std::to_string(worker) +
                                  " died during the trial: " + why.ToString()));
    }
    if (free_.empty() && running_.empty())
      while (!queued_.empty()) {
        FailLocked(std::move(queued_.front()), -1, NoWorkerLeft());
        queued_.pop_front();
      }
  }

  Status NoWorkerLeft() const {
    return UnavailableError("no worker rank is left to run the trial (last: " + last_death_ + ")");
  }

  // REQUIRES: mu_ held.
  void FailLocked(TrialJob job, int worker, Status why) {
    Completion c;
    c.job = std::move(job);
    c.worker = worker;
    c.run = std::move(why);
    done_.push_back(std::move(c));
    cv_.notify_one();
  }

  Communicator& comm_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> free_;                // live workers with no trial; guarded by mu_
  std::map<int, Running> running_;      // by worker rank; guarded by mu_
  std::set<int> dead_;                  // guarded by mu_
  std::string last_death_;              // the newest death, for errors; guarded by mu_
  std::deque<TrialJob> queued_;         // started while no worker was free; guarded by mu_
  std::deque<Completion> done_;         // guarded by mu_
  int64_t next_id_ = 0;                 // guarded by mu_
  bool closing_ = false;                // guarded by mu_
  std::vector<std::thread> listeners_;  // last: they use everything above
};

}  // namespace

std::unique_ptr<Executor> MakeDistributedExecutor(Communicator& comm) {
  return std::make_unique<DistributedExecutor>(comm);
}

Status RunTuneWorker(Communicator& comm, const TrialRunner& runner,
                     const std::function<bool()>& should_stop) {
  while (true) {
    Result<Message> m = comm.Recv(0, kTagWork, DeadlineIn(kPoll));
    if (!m.ok()) {
      if (m.status().code() == StatusCode::kDeadlineExceeded) continue;
      return m.status().WithContext("rank " + std::to_string(comm.rank()) +
                                    ": the search's scheduler (rank 0) is gone");
    }
    REEL_ASSIGN_OR_RETURN(config::TuneWork work, Parse<config::TuneWork>(*m, "trial"));
    if (work.stop()) return Status::Ok();
    TrialRequest req;
    req.config_text = work.config_text();
    req.dir = work.dir();
    req.resume = work.resume();
    // Ranks that a launcher put on one machine share its cores (train/thread_budget.h).
    req.threads = work.threads();
    if (req.threads == 0) {
      REEL_ASSIGN_OR_RETURN(ThreadBudget budget, ThreadsPerRank(ProcessEnvironment(), 1,
                                                                CoresAvailable(), OnlineCores()));
      req.threads = budget.threads;
    }
    req.should_stop = should_stop;
    Result<TrialRun> run = runner(req);
    config::TuneReport report;
    report.set_job(work.job());
    report.set_ok(run.ok());
    if (run.ok()) {
      report.set_gap(run->eval.gap);
      report.set_hit_at_1(run->eval.hit_at_1);
      report.set_perr(run->eval.perr);
      report.set_map(run->eval.map);
      report.set_videos(run->eval.videos);
      report.set_steps(run->steps);
      report.set_last_loss(run->last_loss);
      report.set_interrupted(run->interrupted);
    } else {
      report.set_code(static_cast<int>(run.status().code()));
      report.set_error(run.status().message());
    }
    REEL_RETURN_IF_ERROR(comm.Send(0, kTagReport, Bytes(report.SerializeAsString()), NoDeadline()));
  }
}

}  // namespace reel::core::tune

// A small pool of persistent worker threads for the native path: a large instruction (a matmul)
// is split into parts over disjoint outputs, each computed exactly as the whole would be, so
// results do not depend on the number of threads. KNIT_THREADS caps the threads (default: the
// machine's cores; 1 = no workers).
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace knit::sim {

class WorkerPool {
 public:
  // The process-wide pool.
  static WorkerPool& instance();
  ~WorkerPool();
  // Threads available, the calling one included.
  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  // Runs the jobs on the calling thread and the workers; returns when all are done, then rethrows
  // the first exception a job threw. Calls from different threads take turns; a job must not call
  // run. Thread k (the caller is 0) first takes the jobs of its own share, the k-th of `threads()`
  // equal runs of consecutive jobs, in order, then takes jobs left in the other shares (so a
  // worker the OS has not scheduled leaves its share to the others, which matters on a shared
  // machine). Successive instructions split the same way (a tile's partitions in order), so a
  // thread mostly works on the partitions it touched last, still in its core's cache.
  void run(const std::vector<std::function<void()>>& jobs);

 private:
  explicit WorkerPool(int threads);
  void work(int self);
  // Takes and runs jobs_'s jobs until none is left, its own share first (see run); records the
  // first failure in worker_failure_.
  void drain(const std::vector<std::function<void()>>& jobs, int self);
  // Runs the jobs of `share` not yet taken.
  void drain_share(const std::vector<std::function<void()>>& jobs, int share);

  std::vector<std::thread> workers_;
  std::mutex turn_;  // one run() at a time (two kernels run from two host threads)
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  const std::vector<std::function<void()>>* jobs_ = nullptr;
  // Written under mutex_ (so a sleeper's predicate sees them), read without it while spinning.
  std::atomic<uint64_t> generation_ = 0;
  // Per share (one per thread): the next job of it to take, and the end of it.
  std::unique_ptr<std::atomic<size_t>[]> next_;
  std::vector<size_t> share_end_;
  std::atomic<size_t> pending_ = 0;    // jobs not finished yet
  size_t busy_ = 0;                    // workers inside drain() (under mutex_): jobs_ stays until 0
  std::exception_ptr worker_failure_;  // the first exception of a worker's job (under mutex_)
  bool stop_ = false;
};

}  // namespace knit::sim

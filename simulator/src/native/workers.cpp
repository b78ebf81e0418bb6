#include "workers.h"

#include <exception>
#include <utility>

#include "knit/jit/specializer.h"

namespace knit::sim {

namespace {

// spin_note: the instructions of a run come one after another, each split over the pool, a few
// to a few hundred microseconds apart. A worker that sleeps on the condition variable between
// them pays a futex wake-up per instruction (a tenth of a 2048^3 matmul's run went to the
// kernel's scheduler), so workers and the caller first poll for about 50 us, then sleep.
constexpr int kSpins = 2000;
inline void relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
template <class Ready>
bool spin_until(Ready&& ready) {
  for (int i = 0; i < kSpins; ++i) {
    if (ready()) return true;
    relax();
  }
  return ready();
}

}  // namespace

WorkerPool& WorkerPool::instance() {
  static WorkerPool pool(codegen::knit_threads());
  return pool;
}

WorkerPool::WorkerPool(int threads)
    : next_(std::make_unique<std::atomic<size_t>[]>(threads)), share_end_(static_cast<size_t>(threads)) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void WorkerPool::run(const std::vector<std::function<void()>>& jobs) {
  if (jobs.size() <= 1) {
    if (!jobs.empty()) jobs[0]();
    return;
  }
  std::lock_guard<std::mutex> turn(turn_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_ = &jobs;
    const size_t n = jobs.size(), shares = share_end_.size();
    for (size_t k = 0; k < shares; ++k) {
      next_[k] = k * n / shares;
      share_end_[k] = (k + 1) * n / shares;
    }
    pending_ = n;
    ++generation_;
  }
  wake_.notify_all();
  drain(jobs, 0);
  // Every job finished, and no worker still holds `jobs` (one may have taken it just as the last
  // job was being taken: it finds none left and leaves).
  auto done = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  spin_until(done);  // see spin_note
  std::unique_lock<std::mutex> lock(mutex_);
  finished_.wait(lock, [&] { return done() && busy_ == 0; });
  jobs_ = nullptr;
  const std::exception_ptr failure = std::exchange(worker_failure_, nullptr);
  if (failure) std::rethrow_exception(failure);
}

void WorkerPool::drain(const std::vector<std::function<void()>>& jobs, int self) {
  const int shares = static_cast<int>(share_end_.size());
  for (int k = 0; k < shares; ++k) drain_share(jobs, (self + k) % shares);
}

void WorkerPool::drain_share(const std::vector<std::function<void()>>& jobs, int share) {
  for (size_t i; (i = next_[share].fetch_add(1, std::memory_order_acq_rel)) < share_end_[share];) {
    try {
      jobs[i]();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!worker_failure_) worker_failure_ = std::current_exception();
    }
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);  // the caller may be asleep on finished_
      finished_.notify_all();
    }
  }
}

// A worker joins each generation's run() while it has jobs left.
void WorkerPool::work(int self) {
  uint64_t seen = 0;
  while (true) {
    const std::vector<std::function<void()>>* jobs = nullptr;
    spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; });  // see spin_note
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      jobs = jobs_;
      if (jobs) ++busy_;
    }
    if (!jobs) continue;
    drain(*jobs, self);
    std::lock_guard<std::mutex> lock(mutex_);
    --busy_;
    finished_.notify_all();
  }
}

}  // namespace knit::sim

#include "workers.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace knit::sim {

WorkerPool& WorkerPool::instance() {
  static WorkerPool pool([] {
    int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (const char* env = std::getenv("KNIT_THREADS"); env && *env) n = std::max(1, std::atoi(env));
    return std::min(n, 64);
  }());
  return pool;
}

WorkerPool::WorkerPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(static_cast<size_t>(i)); });
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
  if (jobs.size() > 1) {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_ = &jobs;
    pending_ = jobs.size() - 1;
    ++generation_;
  }
  if (jobs.size() > 1) wake_.notify_all();
  if (!jobs.empty()) jobs[0]();
  if (jobs.size() > 1) {
    std::unique_lock<std::mutex> lock(mutex_);
    finished_.wait(lock, [&] { return pending_ == 0; });
    jobs_ = nullptr;
  }
}

// Worker i runs job i of each generation that has one.
void WorkerPool::work(size_t index) {
  uint64_t seen = 0;
  while (true) {
    const std::function<void()>* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (jobs_ && index < jobs_->size()) job = &(*jobs_)[index];
    }
    if (!job) continue;
    (*job)();
    std::lock_guard<std::mutex> lock(mutex_);
    if (--pending_ == 0) finished_.notify_one();
  }
}

}  // namespace knit::sim

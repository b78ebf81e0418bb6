// The native path's worker pool (simulator/src/native/workers.h): every job runs once, callers on
// different threads take turns, and a job's exception reaches the caller after every job is done.
#include <catch2/catch.hpp>

#include <atomic>
#include <functional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "native/workers.h"

using knit::sim::WorkerPool;

namespace {

// One job per thread of the pool, job i adding i + 1 to its own slot `rounds` times.
std::vector<int64_t> run_rounds(int rounds) {
  WorkerPool& pool = WorkerPool::instance();
  std::vector<int64_t> slots(static_cast<size_t>(pool.threads()), 0);
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::function<void()>> jobs;
    for (size_t i = 0; i < slots.size(); ++i) jobs.push_back([&slots, i] { slots[i] += static_cast<int64_t>(i) + 1; });
    pool.run(jobs);
  }
  return slots;
}

}  // namespace

TEST_CASE("WorkerPool runs every job of every round exactly once", "[workers]") {
  const std::vector<int64_t> slots = run_rounds(2000);
  for (size_t i = 0; i < slots.size(); ++i) REQUIRE(slots[i] == 2000 * static_cast<int64_t>(i + 1));
}

TEST_CASE("WorkerPool callers on two threads take turns", "[workers]") {
  std::vector<int64_t> a, b;
  std::thread other([&] { b = run_rounds(500); });
  a = run_rounds(500);
  other.join();
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i] == 500 * static_cast<int64_t>(i + 1));
    REQUIRE(b[i] == 500 * static_cast<int64_t>(i + 1));
  }
}

TEST_CASE("WorkerPool rethrows a job's exception after every job has finished", "[workers]") {
  WorkerPool& pool = WorkerPool::instance();
  const int n = pool.threads();
  for (int thrower = 0; thrower < n; ++thrower) {
    std::atomic<int> finished = 0;
    std::vector<std::function<void()>> jobs;
    for (int i = 0; i < n; ++i)
      jobs.push_back([&finished, i, thrower] {
        if (i == thrower) throw std::runtime_error("job " + std::to_string(i));
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        ++finished;
      });
    REQUIRE_THROWS_WITH(pool.run(jobs), "job " + std::to_string(thrower));
    REQUIRE(finished == n - 1);
  }
  // The pool still works afterwards.
  REQUIRE(run_rounds(1)[0] == 1);
}

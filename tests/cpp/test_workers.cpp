// The native path's worker pool (simulator/src/native/workers.h): every job runs once, callers on
// different threads take turns, a stalled thread's share is taken by the others, and a job's
// exception reaches the caller after every job is done.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
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

TEST_CASE("WorkerPool runs every job once for any count of jobs, shares uneven", "[workers]") {
  WorkerPool& pool = WorkerPool::instance();
  for (int n = 0; n <= 4 * pool.threads() + 3; ++n) {
    std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
    std::vector<std::function<void()>> jobs;
    for (int i = 0; i < n; ++i) jobs.push_back([&runs, i] { ++runs[static_cast<size_t>(i)]; });
    pool.run(jobs);
    for (int i = 0; i < n; ++i) REQUIRE(runs[static_cast<size_t>(i)] == 1);
  }
}

TEST_CASE("WorkerPool: the jobs of a stalled thread's share are taken by the others", "[workers]") {
  WorkerPool& pool = WorkerPool::instance();
  if (pool.threads() < 2) {
    WARN("skipped: needs a worker thread besides the caller (KNIT_THREADS=1 or a one-core machine)");
    return;
  }
  // The caller's first job (job 0, its own share's first) waits until every other job is done,
  // so the rest of the caller's share must be run by the workers.
  const int n = 4 * pool.threads();
  std::atomic<int> others_done = 0;
  std::atomic<bool> gave_up = false;
  std::vector<std::function<void()>> jobs;
  jobs.push_back([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (others_done < n - 1)
      if (std::chrono::steady_clock::now() > deadline) return void(gave_up = true);
  });
  for (int i = 1; i < n; ++i) jobs.push_back([&] { ++others_done; });
  pool.run(jobs);
  REQUIRE(!gave_up);
  REQUIRE(others_done == n - 1);
}

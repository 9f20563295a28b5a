// comm/ordered_worker.h: the communication thread the bucket reducer and the
// parameter gather share -- jobs in order, rounds, errors, settle and join.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "comm/ordered_worker.h"

using namespace lockstep;

TEST_CASE("OrderedWorker runs launched jobs once each, in order, round after round", "[comm][worker]") {
  std::mutex mu;
  std::vector<size_t> ran;
  OrderedWorker w([&](size_t k) {
    std::lock_guard<std::mutex> lock(mu);
    ran.push_back(k);
  });
  for (int round = 0; round < 3; ++round) {
    w.restart();
    w.launch(2);
    w.launch(1);  // below the launched count: no change
    CHECK(w.launched() == 2);
    w.wait([](size_t done, size_t) { return done == 2; });
    w.launch(5);
    w.wait([](size_t done, size_t launched) { return done == launched; });
  }
  REQUIRE(ran == std::vector<size_t>{0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4});
}

TEST_CASE("OrderedWorker::wait says whether it blocked, and waits for the condition", "[comm][worker]") {
  std::atomic<bool> release{false};
  OrderedWorker w([&](size_t) {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  w.restart();
  CHECK_FALSE(w.wait([](size_t done, size_t) { return done == 0; }));  // holds at once
  w.launch(1);
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    release = true;
  });
  CHECK(w.wait([](size_t done, size_t) { return done == 1; }));
  releaser.join();
}

TEST_CASE("OrderedWorker: a failed job stops the round and its error reaches every wait", "[comm][worker]") {
  std::atomic<int> ran{0};
  OrderedWorker w([&](size_t k) {
    ++ran;
    if (k == 1) throw std::runtime_error("bucket 1 failed");
  });
  w.restart();
  w.launch(4);
  REQUIRE_THROWS_WITH(w.wait([](size_t done, size_t) { return done == 4; }), "bucket 1 failed");
  CHECK(w.failed());
  CHECK(ran == 2);  // jobs 2 and 3 never ran
  REQUIRE_THROWS_WITH(w.rethrow_if_failed(), "bucket 1 failed");
  w.settle();  // returns at once: the round has failed
}

TEST_CASE("OrderedWorker refuses a new round while jobs are under way, and settle waits for them", "[comm][worker]") {
  std::atomic<bool> release{false};
  std::atomic<int> ran{0};
  OrderedWorker w([&](size_t) {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ++ran;
  });
  w.restart();
  w.launch(3);
  CHECK_THROWS(w.restart());
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    release = true;
  });
  w.settle();
  CHECK(ran == 3);
  releaser.join();
  w.restart();  // idle again
}

TEST_CASE("OrderedWorker's destructor joins after the job under way and drops the rest", "[comm][worker]") {
  std::atomic<int> ran{0};
  {
    OrderedWorker w([&](size_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      ++ran;
    });
    w.restart();
    w.launch(100);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(ran >= 1);
  CHECK(ran < 100);
}

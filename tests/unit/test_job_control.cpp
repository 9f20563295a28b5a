// lockstep-run's abort channel (launcher/job_control.h): the variable's format,
// a notice reaching the listener, and notices the listener must ignore.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <future>
#include <memory>

#include "job_control.h"

using namespace lockstep;

TEST_CASE("LOCKSTEP_RUN_CONTROL round-trips and rejects malformed values", "[job_control]") {
  ControlEndpoint e{"0123abcd", 4242, {"10.0.0.1", "127.0.0.1"}};
  const std::string text = format_control(e);
  CHECK(text == "0123abcd@4242@10.0.0.1,127.0.0.1");
  const auto back = parse_control(text);
  REQUIRE(back);
  CHECK(back->token == e.token);
  CHECK(back->port == 4242);
  CHECK(back->addresses == e.addresses);
  for (const char* bad : {"", "tok@42", "@42@127.0.0.1", "tok@0@127.0.0.1", "tok@70000@127.0.0.1", "tok@x@127.0.0.1",
                          "tok@42@", "tok@42@localhost", "tok@42@1.2.3.4,", "tok@42@1.2.3.4@5"})
    CHECK_FALSE(parse_control(bad));
}

TEST_CASE("a rank's abort notice reaches the listener, which answers it", "[job_control]") {
  AbortListener listener("");
  REQUIRE(listener.endpoint().port > 0);
  REQUIRE(listener.endpoint().addresses.back() == "127.0.0.1");
  ControlEndpoint loopback = listener.endpoint();
  loopback.addresses = {"127.0.0.1"};
  setenv(kRunControlVariable, format_control(loopback).c_str(), 1);
  auto sent = std::async(std::launch::async, [] { return notify_launcher_of_abort(3, "collective timeout\nmore"); });
  std::vector<ControlEvent> got;
  for (int i = 0; i < 30 && got.empty(); ++i) got = listener.poll(100);
  CHECK(sent.get());
  REQUIRE(got.size() == 1);
  CHECK(got[0].kind == ControlEvent::Kind::Abort);
  CHECK(got[0].code == 3);
  CHECK(got[0].cause == "collective timeout");  // the first line only
  unsetenv(kRunControlVariable);
}

TEST_CASE("rank 0's progress reports reach the listener in order", "[job_control]") {
  AbortListener listener("");
  ControlEndpoint loopback = listener.endpoint();
  loopback.addresses = {"127.0.0.1"};
  setenv(kRunControlVariable, format_control(loopback).c_str(), 1);
  auto connecting = std::async(std::launch::async, [] { return LauncherReports::connect(); });
  for (int i = 0; i < 30 && connecting.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready; ++i)
    listener.poll(100);
  std::unique_ptr<LauncherReports> reports = connecting.get();
  REQUIRE(reports);
  reports->started(30, 2, 64, 16, 2);
  reports->stepped(31);
  reports->stepped(32);
  std::vector<ControlEvent> got;
  for (int i = 0; i < 30 && got.size() < 3; ++i)
    for (const ControlEvent& e : listener.poll(100)) got.push_back(e);
  REQUIRE(got.size() == 3);
  CHECK(got[0].kind == ControlEvent::Kind::Start);
  CHECK((got[0].step == 30 && got[0].world == 2 && got[0].global_batch == 64 && got[0].micro_batch == 16 &&
         got[0].accumulate == 2));
  CHECK((got[1].kind == ControlEvent::Kind::Step && got[1].step == 31));
  CHECK((got[2].kind == ControlEvent::Kind::Step && got[2].step == 32));
  reports.reset();  // closed: the listener drops the connection and hears nothing more
  CHECK(listener.poll(200).empty());
  unsetenv(kRunControlVariable);
}

TEST_CASE("a notice with the wrong token is ignored and not answered", "[job_control]") {
  AbortListener listener("");
  ControlEndpoint wrong = listener.endpoint();
  wrong.addresses = {"127.0.0.1"};
  wrong.token = "not-the-token";
  setenv(kRunControlVariable, format_control(wrong).c_str(), 1);
  auto sent = std::async(std::launch::async, [] { return notify_launcher_of_abort(3, "", 1.0); });
  std::vector<ControlEvent> got;
  for (int i = 0; i < 10 && got.empty(); ++i) got = listener.poll(100);
  CHECK(got.empty());
  CHECK_FALSE(sent.get());
  unsetenv(kRunControlVariable);
}

TEST_CASE("without LOCKSTEP_RUN_CONTROL, or with nobody listening, notifying returns quickly", "[job_control]") {
  unsetenv(kRunControlVariable);
  CHECK_FALSE(notify_launcher_of_abort(3));
  setenv(kRunControlVariable, "tok@1@127.0.0.1", 1);  // port 1: refused at once
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(notify_launcher_of_abort(3, "", 2.0));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3));
  unsetenv(kRunControlVariable);
}

// --overlap (launcher/thread_counts.h, options.cpp): auto reduces during
// backward on the GPU, across hosts and where a core is free, after backward
// where the ranks' compute threads fill the host's cores; on and off as
// given; --no-overlap is --overlap off and contradicts --overlap on.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/error.h"
#include "options.h"
#include "parse_options.h"
#include "thread_counts.h"

using namespace lockstep;
using lockstep::testing::parse;
using lockstep::testing::parse_error;

namespace {

// `ranks` on this host with `threads` compute threads each, on `cores` cores together.
OverlapSite cpu_host(int world, int hosts, int ranks, int threads, int cores) {
  return {false, world, hosts, ranks, ranks * threads, cores};
}

}  // namespace

TEST_CASE("overlap auto is off where the ranks' compute threads fill the host's cores", "[overlap]") {
  // 2 ranks x 1 thread on 2 cores (mpirun -np 2 on the development machine,
  // each rank bound to a core of its own or not).
  OverlapChoice c = choose_overlap(Switch::Auto, cpu_host(2, 1, 2, 1, 2));
  CHECK(!c.on);
  CHECK(c.why ==
        "this host's 2 ranks run 2 compute threads on 2 cores: a communication thread would compete with backward");
  // The default --threads 0 gives each rank cores / local ranks: full too.
  CHECK(!choose_overlap(Switch::Auto, cpu_host(4, 1, 4, 16, 64)).on);
  CHECK(!choose_overlap(Switch::Auto, cpu_host(4, 1, 4, 2, 4)).on);  // oversubscribed
  // Ranks bound to one core each on a bigger host: their cores are full.
  CHECK(!choose_overlap(Switch::Auto, cpu_host(2, 1, 2, 1, 2)).on);
}

TEST_CASE("overlap auto is on where a core is free, across hosts and on the GPU", "[overlap]") {
  OverlapChoice c = choose_overlap(Switch::Auto, cpu_host(2, 1, 2, 1, 4));
  CHECK(c.on);
  CHECK(c.why == "this host's 2 ranks run 2 compute threads on 4 cores: 2 free for communication");
  CHECK(choose_overlap(Switch::Auto, cpu_host(3, 1, 3, 1, 4)).on);  // 4 cores / 3 ranks: one spare
  c = choose_overlap(Switch::Auto, cpu_host(2, 2, 1, 2, 2));          // one rank per host, its cores full
  CHECK(c.on);
  CHECK(c.why == "gradients cross hosts: the link's time hides behind backward");
  c = choose_overlap(Switch::Auto, {true, 8, 1, 8, 8, 2});
  CHECK(c.on);
  CHECK(c.why == "the GPU computes; NCCL reduces on a stream of its own");
}

TEST_CASE("overlap on and off are kept as given, and one rank has nothing to overlap", "[overlap]") {
  for (const OverlapSite& s : {cpu_host(2, 1, 2, 1, 2), cpu_host(2, 1, 2, 1, 8), cpu_host(2, 2, 1, 2, 2)}) {
    CHECK(choose_overlap(Switch::On, s).on);
    CHECK(!choose_overlap(Switch::Off, s).on);
    CHECK(choose_overlap(Switch::On, s).why.empty());
    CHECK(choose_overlap(Switch::Off, s).why.empty());
  }
  const OverlapChoice one = choose_overlap(Switch::Auto, cpu_host(1, 1, 1, 2, 2));
  CHECK(one.on);
  CHECK(one.why.empty());  // nothing to say: nothing is reduced
}

TEST_CASE("the overlap option takes auto, on and off, and no-overlap means off", "[overlap]") {
  CHECK(parse({}).overlap == Switch::Auto);
  CHECK(parse({"--overlap", "on"}).overlap == Switch::On);
  CHECK(parse({"--overlap=off"}).overlap == Switch::Off);
  CHECK(parse({"--no-overlap"}).overlap == Switch::Off);
  CHECK(parse({"--no-overlap", "--overlap", "off"}).overlap == Switch::Off);
  CHECK(parse({"--no-overlap", "--overlap", "auto"}).overlap == Switch::Off);
  CHECK(parse_error({"--no-overlap", "--overlap", "on"}) == "--no-overlap and --overlap on contradict each other");
  CHECK(parse_error({"--overlap", "sometimes"}) == "--overlap: 'sometimes' is not one of auto, on, off");
}

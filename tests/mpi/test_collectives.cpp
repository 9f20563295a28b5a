// Collectives checked against closed forms of the rank and world size.
#include <catch2/catch.hpp>

#include "mpi_world.h"

using namespace lockstep;
using lockstep::testing::world;

TEST_CASE("topology: one host, every rank local", "[mpi]") {
  Communicator& c = world();
  CHECK(c.size() >= 2);
  CHECK(c.rank() >= 0);
  CHECK(c.rank() < c.size());
  CHECK(c.local_size() == c.size());
  CHECK(c.local_rank() == c.rank());
  CHECK(c.nodes() == 1);
}

TEST_CASE("allreduce sum, average, min, max", "[mpi]") {
  Communicator& c = world();
  const int r = c.rank(), n = c.size();
  for (int64_t len : {1, 7, 1000, 1 << 20}) {
    Tensor t = Tensor::zeros(Shape{len});
    for (int64_t i = 0; i < len; ++i) t.data<float>()[i] = static_cast<float>(r + i % 97);
    c.allreduce(t, ReduceOp::Sum);
    bool ok = true;
    for (int64_t i = 0; i < len; ++i)  // sum_r (r + k) = n k + n(n-1)/2, exact in fp32
      ok = ok && t.data<float>()[i] == static_cast<float>(n * (i % 97) + n * (n - 1) / 2);
    CHECK(ok);
  }
  Tensor avg = Tensor::from_vector(Shape{3}, {static_cast<float>(r + 1), 2.f * r, -1.f});
  c.allreduce(avg, ReduceOp::Average);
  CHECK(avg.data<float>()[0] == Approx((n + 1) / 2.0));
  CHECK(avg.data<float>()[1] == Approx(n - 1.0));
  CHECK(avg.data<float>()[2] == -1.f);
  Tensor mn = Tensor::from_vector(Shape{2}, {static_cast<float>(r), static_cast<float>(-r)});
  Tensor mx = Tensor::from_vector(Shape{2}, {static_cast<float>(r), static_cast<float>(-r)});
  c.allreduce(mn, ReduceOp::Min);
  c.allreduce(mx, ReduceOp::Max);
  CHECK(mn.to_vector() == std::vector<float>{0.f, static_cast<float>(1 - n)});
  CHECK(mx.to_vector() == std::vector<float>{static_cast<float>(n - 1), 0.f});
}

TEST_CASE("allreduce of 64-bit and integer types", "[mpi]") {
  Communicator& c = world();
  const int r = c.rank(), n = c.size();
  Tensor d = Tensor::zeros(Shape{2}, DType::F64);
  d.data<double>()[0] = 1e15 + r;  // beyond fp32's integers
  d.data<double>()[1] = 0.5 * r;
  c.allreduce(d, ReduceOp::Sum);
  CHECK(d.data<double>()[0] == n * 1e15 + n * (n - 1) / 2);
  CHECK(d.data<double>()[1] == 0.25 * n * (n - 1));
  Tensor i64 = Tensor::zeros(Shape{1}, DType::I64);
  i64.data<int64_t>()[0] = (int64_t{1} << 40) * (r + 1);
  c.allreduce(i64, ReduceOp::Sum);
  CHECK(i64.data<int64_t>()[0] == (int64_t{1} << 40) * n * (n + 1) / 2);
  Tensor i32 = Tensor::zeros(Shape{1}, DType::I32);
  i32.data<int32_t>()[0] = r;
  c.allreduce(i32, ReduceOp::Max);
  CHECK(i32.data<int32_t>()[0] == n - 1);
  CHECK(allreduce_scalar(c, r, ReduceOp::Sum) == n * (n - 1) / 2.0);
}

TEST_CASE("broadcast from every root", "[mpi]") {
  Communicator& c = world();
  for (int root = 0; root < c.size(); ++root) {
    Tensor t = Tensor::zeros(Shape{5});
    for (int64_t i = 0; i < 5; ++i) t.data<float>()[i] = static_cast<float>(c.rank() * 100 + i);
    c.broadcast(t, root);
    bool ok = true;
    for (int64_t i = 0; i < 5; ++i) ok = ok && t.data<float>()[i] == static_cast<float>(root * 100 + i);
    CHECK(ok);
    CHECK(broadcast_string(c, "from " + std::to_string(c.rank()), root) == "from " + std::to_string(root));
  }
}

TEST_CASE("allgather in rank order, fixed and variable length", "[mpi]") {
  Communicator& c = world();
  const int n = c.size();
  Tensor mine = Tensor::zeros(Shape{2}, DType::I64);
  mine.data<int64_t>()[0] = c.rank();
  mine.data<int64_t>()[1] = c.rank() * c.rank();
  Tensor all = Tensor::zeros(Shape{2 * n}, DType::I64);
  c.allgather(mine, all);
  bool ok = true;
  for (int r = 0; r < n; ++r) ok = ok && all.data<int64_t>()[2 * r] == r && all.data<int64_t>()[2 * r + 1] == r * r;
  CHECK(ok);
  const auto strings = allgather_strings(c, std::string(static_cast<size_t>(c.rank()), 'x') + "!");
  CHECK(strings.size() == static_cast<size_t>(n));
  for (int r = 0; r < n && r < static_cast<int>(strings.size()); ++r)
    CHECK(strings[static_cast<size_t>(r)] == std::string(static_cast<size_t>(r), 'x') + "!");
  c.barrier();
}

TEST_CASE("misuse is an error, not a hang", "[mpi]") {
  Communicator& c = world();
  Tensor u8 = Tensor::zeros(Shape{3}, DType::U8);
  CHECK_THROWS_AS(c.allreduce(u8, ReduceOp::Sum), Error);  // checked before any MPI call
  Tensor ints = Tensor::zeros(Shape{3}, DType::I32);
  CHECK_THROWS_AS(c.allreduce(ints, ReduceOp::Average), Error);
  Tensor t = Tensor::zeros(Shape{1});
  CHECK_THROWS_AS(c.broadcast(t, c.size()), Error);
}

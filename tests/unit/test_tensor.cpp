// Tensor, Shape, dtype and error basics.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "tensor/tensor.h"

using namespace lockstep;

TEST_CASE("numel counts elements and nbytes counts bytes", "[tensor]") {
  Tensor f = Tensor::zeros(Shape{2, 3, 4});
  CHECK(f.numel() == 24);
  CHECK(f.nbytes() == 96);
  Tensor b = Tensor::zeros(Shape{2, 3, 4}, DType::BF16);
  CHECK(b.numel() == 24);
  CHECK(b.nbytes() == 48);
  Tensor u = Tensor::zeros(Shape{5}, DType::U8);
  CHECK(u.nbytes() == 5);
  CHECK(Shape{}.numel() == 1);
  CHECK(Shape{3, 0}.numel() == 0);
}

TEST_CASE("storage is 64-byte aligned and zero-filled", "[tensor]") {
  Tensor t = Tensor::zeros(Shape{1000});
  CHECK(reinterpret_cast<uintptr_t>(t.raw_data()) % 64 == 0);
  for (float v : t.span<float>()) REQUIRE(v == 0.f);
}

TEST_CASE("views share storage", "[tensor]") {
  Tensor t = Tensor::from_vector(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor r = t.reshape(Shape{3, 2});
  Tensor s = t.slice(2, Shape{2, 2});
  CHECK(s.to_vector() == std::vector<float>{3, 4, 5, 6});
  s.data<float>()[0] = 30;
  CHECK(t.data<float>()[2] == 30);
  CHECK(r.data<float>()[2] == 30);
  CHECK(t.narrow_rows(1).to_vector() == std::vector<float>{1, 2, 30});
}

TEST_CASE("misuse throws errors carrying file:line", "[tensor]") {
  Tensor t = Tensor::zeros(Shape{2, 3});
  CHECK_THROWS_AS(t.reshape(Shape{4}), Error);
  CHECK_THROWS_AS(t.slice(5, Shape{2}), Error);
  CHECK_THROWS_AS(t.data<int32_t>(), Error);
  CHECK_THROWS_AS(Shape({1, -2}), Error);
  try {
    t.reshape(Shape{7});
    FAIL("no throw");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK(what.find("cannot reshape [2, 3] to [7]") != std::string::npos);
    CHECK(what.find("runtime/tensor/tensor.cpp:") != std::string::npos);
    CHECK(e.line() > 0);
  }
}

TEST_CASE("dtype names round-trip", "[tensor]") {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8})
    CHECK(dtype_from_name(dtype_name(t)) == t);
  CHECK_FALSE(dtype_from_name("F8").has_value());
}

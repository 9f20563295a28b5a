// cuBLAS opened at run time (runs without a GPU: dlopen and dlsym need no
// driver): the library and every entry point lockstep calls resolve, and a
// missing library or entry point is one clear error naming it. That a CPU run
// never opens it is checked end to end by tests/trainer/outputs.sh.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"
#include "cuda/cublas_library.h"

using lockstep::cuda::CublasLibrary;

namespace {
std::string own_mappings() {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str();
}
}  // namespace

TEST_CASE("cuBLAS opens at run time with every entry point", "[cuda][cublas]") {
  const CublasLibrary lib;
  INFO("opened " << lib.path());
  CHECK(lib.path().find(CublasLibrary::default_soname()) != std::string::npos);
  CHECK(lib.create != nullptr);
  CHECK(lib.destroy != nullptr);
  CHECK(lib.set_stream != nullptr);
  CHECK(lib.set_math_mode != nullptr);
  CHECK(lib.sgemm != nullptr);
  CHECK(lib.gemm_ex != nullptr);
  CHECK(own_mappings().find("libcublas.so") != std::string::npos);
  // A second owner shares the mapping; the first keeps working after it goes.
  { const CublasLibrary again; CHECK(again.sgemm == lib.sgemm); }
  CHECK(own_mappings().find("libcublas.so") != std::string::npos);
}

TEST_CASE("a missing cuBLAS or entry point is one clear error", "[cuda][cublas]") {
  CHECK_THROWS_AS(CublasLibrary("libcublas-not-here.so.0"), lockstep::Error);
  CHECK_THROWS_WITH(CublasLibrary("libcublas-not-here.so.0"),
                    Catch::Contains("cannot open cuBLAS (libcublas-not-here.so.0)") &&
                        Catch::Contains("LD_LIBRARY_PATH"));
  // A library that opens but is not cuBLAS.
  CHECK_THROWS_WITH(CublasLibrary("libz.so.1"), Catch::Contains("has no entry point cublasCreate_v2"));
}

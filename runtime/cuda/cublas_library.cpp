// cuBLAS opened with dlopen and its entry points resolved with dlsym.
#include "cuda/cublas_library.h"

#include <dlfcn.h>
#include <link.h>

#include "core/error.h"

namespace lockstep::cuda {
namespace {

// The directory the build found cuBLAS in (runtime/CMakeLists.txt), tried
// when the usual search finds nothing: an installed binary has no RUNPATH.
#ifdef LOCKSTEP_CUBLAS_DIR
constexpr const char* kBuildDir = LOCKSTEP_CUBLAS_DIR;
#else
constexpr const char* kBuildDir = "";
#endif

std::string last_dlerror() {
  const char* e = dlerror();
  return e ? e : "unknown reason";
}

template <typename F>
void resolve(void* handle, const std::string& path, const char* name, F& fn) {
  dlerror();  // clear
  fn = reinterpret_cast<F>(dlsym(handle, name));
  if (!fn) LS_THROW("cuBLAS library {} has no entry point {}: {}", path, name, last_dlerror());
}

}  // namespace

std::string CublasLibrary::default_soname() { return fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR); }

CublasLibrary::CublasLibrary(const std::string& soname) {
  constexpr int kFlags = RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE;
  handle_ = dlopen(soname.c_str(), kFlags);
  std::string reason;
  if (!handle_) {
    reason = last_dlerror();
    const bool bare_name = soname.find('/') == std::string::npos;
    if (bare_name && *kBuildDir) handle_ = dlopen(fmt::format("{}/{}", kBuildDir, soname).c_str(), kFlags);
  }
  if (!handle_)
    LS_THROW("cannot open cuBLAS ({}): {}; the GPU path needs it (add its directory to LD_LIBRARY_PATH)", soname,
             reason);
  const link_map* map = nullptr;
  path_ = dlinfo(handle_, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name ? map->l_name : soname;
  try {
    resolve(handle_, path_, "cublasCreate_v2", create);
    resolve(handle_, path_, "cublasDestroy_v2", destroy);
    resolve(handle_, path_, "cublasSetStream_v2", set_stream);
    resolve(handle_, path_, "cublasSetMathMode", set_math_mode);
    resolve(handle_, path_, "cublasSgemm_v2", sgemm);
    resolve(handle_, path_, "cublasGemmEx", gemm_ex);
  } catch (...) {
    dlclose(handle_);
    throw;
  }
}

CublasLibrary::~CublasLibrary() {
  if (handle_) dlclose(handle_);
}

}  // namespace lockstep::cuda

// trainer: the command-line entry point. Parses options, runs training, and
// turns every error into one line on stderr and a non-zero exit:
//   0 success, 1 internal error, 2 bad input (flags, environment, files).
#include <spdlog/spdlog.h>

#include <exception>

#include "blas_select.h"
#include "core/error.h"
#include "core/logging.h"
#include "options.h"
#include "train_loop.h"

int main(int argc, char** argv) {
  lockstep::select_fast_blas_kernels(argv);
  lockstep::Logger log = lockstep::make_logger(0, 1, false);
  try {
    lockstep::TrainConfig config;
    if (lockstep::parse_train_options(argc, argv, config) == lockstep::ParseOutcome::Exit) return 0;
    log->set_level(spdlog::level::from_str(config.log_level));
    lockstep::validate_train_config(config);
    lockstep::run_training(config, log);
    return 0;
  } catch (const lockstep::InputError& e) {
    log->error("{}", e.message());
    return 2;
  } catch (const lockstep::Error& e) {
    log->error("{}", e.what());
    return 1;
  } catch (const std::exception& e) {
    log->error("{}", e.what());
    return 1;
  }
}

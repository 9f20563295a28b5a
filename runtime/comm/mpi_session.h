// MpiSession: owns MPI's lifetime in a process (MPI_Init_thread ... MPI_Finalize).
// Without mpirun this is an MPI singleton, a world of one. The launcher makes
// exactly one, first thing in main; everything MPI in the runtime takes its
// communicator from it explicitly.
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace lockstep {

class MpiSession {
 public:
  // Asks for MPI_THREAD_MULTIPLE (later issues run collectives on a
  // communication thread); thread_level() says what MPI granted.
  MpiSession(int* argc, char*** argv);
  ~MpiSession();  // MPI_Finalize, unless MPI is already finalised
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int thread_level() const { return thread_level_; }
  bool thread_multiple() const;
  const char* thread_level_name() const;

  // A communicator over all processes of the job (MPI_COMM_WORLD duplicated,
  // so library traffic never mixes with a user's).
  std::unique_ptr<Communicator> world() const;

  // Ends every process of the job. Only the launcher calls this, after
  // printing why; it does not return.
  [[noreturn]] static void abort(int code);

 private:
  int thread_level_ = 0;
};

}  // namespace lockstep

// Checks an MPI call's return code (communicators use MPI_ERRORS_RETURN) and
// throws CommError naming the call, rank, host and file:line.
#pragma once

#include <mpi.h>

#include "core/error.hpp"

namespace gpt {

class CommError : public Error {
 public:
  using Error::Error;
};

[[noreturn]] void throw_mpi_error(int code, const char* stmt, const char* file, int line);

}  // namespace gpt

#define GPT_MPI_CHECK(stmt)                                                 \
  do {                                                                      \
    int gpt_mpi_rc_ = (stmt);                                               \
    if (gpt_mpi_rc_ != MPI_SUCCESS) ::gpt::throw_mpi_error(gpt_mpi_rc_, #stmt, __FILE__, __LINE__); \
  } while (0)

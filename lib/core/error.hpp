// Typed errors thrown by the libraries. Only apps/ catch them: they log the
// one-line message and make every rank exit (see comm/mpi_env.hpp).
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace gpt {

// Base of every error the project throws on purpose. what() is one line that
// names the file, key or value at fault.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A bad configuration key or value (TOML file or command line).
class ConfigError : public Error {
 public:
  using Error::Error;
};

// Bad input data: a missing, truncated or malformed shard, out-of-vocabulary
// tokens, unreadable tokenizer files.
class DataError : public Error {
 public:
  using Error::Error;
};

// The job can no longer make progress: a collective failed (NCCL reported
// an asynchronous error), or a wait for one (or for a GPU waiting for one)
// outlasted --comm-timeout (core/watchdog.hpp). Whoever catches it must not
// wait for the GPU or the other ranks again: a stream synchronisation, a
// cudaFree, a communicator's destruction, a collective checkpoint write
// would block forever. So gpt_train ends every rank without running the
// trainer's destructors (apps/gpt_train.cpp).
class StuckError : public Error {
 public:
  using Error::Error;
};

// Training diverged: a step's loss or gradient norm is NaN or Inf (more
// steps in a row than --skip-nonfinite allows). Decided from values every
// rank holds alike (the global norm, the loss meaned over ranks), so every
// rank throws it at the same step: printed once.
class DivergedError : public Error {
 public:
  using Error::Error;
};

// Contract violation inside the program (a bug, not bad input).
class InternalError : public Error {
 public:
  using Error::Error;
};

[[noreturn]] void throw_internal(const char* cond, const char* file, int line, const std::string& msg);

}  // namespace gpt

// Checks an internal invariant; on failure throws InternalError naming the
// condition and file:line. Not for validating user input (use ConfigError /
// DataError with a message that names the input).
#define GPT_CHECK(cond, ...)                                                       \
  do {                                                                             \
    if (!(cond)) ::gpt::throw_internal(#cond, __FILE__, __LINE__, fmt::format(__VA_ARGS__)); \
  } while (0)

// The MpiEnv created by mpi_gtest_main, for tests that need the bootstrap.
#pragma once

#include "comm/mpi_env.hpp"

namespace gpt::test {
const MpiEnv& env();
}

#include "fixtures.hpp"

#include <mpi.h>

#include <filesystem>
#include <vector>

#include "io/token_shard.hpp"
#include "mpi_test_env.hpp"

namespace gpt::test {

const std::string& data_dir() {
  static const std::string dir = [] {
    const std::string d = (std::filesystem::temp_directory_path() / "gpt_mpi_test_data").string();
    if (env().rank() == 0) {
      std::filesystem::create_directories(d);
      // A noisy repeating sequence: structure to learn, not trivially.
      std::vector<uint16_t> toks(40000);
      uint64_t s = 12345;
      for (size_t i = 0; i < toks.size(); ++i) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        toks[i] = uint16_t((s >> 33) % 7 == 0 ? (s >> 40) % 256 : (i * 31 + i / 7) % 97);
      }
      ShardWriter w(d + "/data_train_000000.bin");
      w.append(toks);
      w.close();
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return d;
  }();
  return dir;
}

RunConfig small_run() {
  RunConfig c;
  c.model = "tiny";
  c.gpt = GPTConfig{2, 4, 64, 32, 256};
  c.seq_len = 32;
  c.global_batch = 8 % env().size() == 0 ? 8 : 2 * env().size();  // divisible by the world
  c.micro_batch = c.global_batch / env().size();
  c.steps = 10;
  c.lr = 3e-3f;
  c.min_lr = 3e-4f;
  c.warmup = 2;
  c.clip = 0.5f;  // below the norms seen here: clipping is active
  c.threads = 1;
  c.sample_tokens = 0;
  c.log_level = "warn";
  c.data = data_dir() + "/data_train_*.bin";
  return c;
}

}  // namespace gpt::test

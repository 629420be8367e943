#include "model/flops.hpp"

#include <cctype>
#include <regex>

namespace gpt {

int64_t matmul_params(const GPTConfig& c) {
  const int64_t C = c.n_embd;
  return int64_t(c.n_layer) * 12 * C * C + int64_t(c.vocab_size) * C;
}

StepFlops step_flops_per_token(const GPTConfig& c, int seq_len) {
  const double head_weights = double(c.vocab_size) * c.n_embd;
  const double forward = 2.0 * (double(matmul_params(c)) - head_weights) + 4.0 * c.n_layer * double(c.n_embd) * seq_len;
  return {forward, 6.0 * head_weights, 2.0 * forward};
}

double train_flops_per_token(const GPTConfig& c, int seq_len) {
  const StepFlops f = step_flops_per_token(c, seq_len);
  return f.blocks_forward + f.head + f.blocks_backward;
}

double forward_flops_per_token(const GPTConfig& c, int seq_len) {
  const StepFlops f = step_flops_per_token(c, seq_len);
  return f.blocks_forward + f.head / 3;  // the head's forward GEMM of its three
}

}  // namespace gpt

namespace gpt {

namespace {
// A key matches where the name holds it as whole words (no letter or digit
// either side): "NVIDIA A100-SXM4-40GB" is an A100, "NVIDIA RTX A1000"
// neither an A100 nor an A10, "NVIDIA A10G" (AWS's, slower) not an A10.
// Most specific first: "H100 PCIe" must not match the SXM row. A GB200's
// GPU takes the B200's figures (its 1200 W peak is 2500). The GeForce and
// RTX workstation rows: bf16 with fp32 accumulation (a GeForce card's
// tensor cores run it at half their fp16-accumulate rate); their laptop
// parts (clocked lower) are not these rows. The RTX 3090's figures are
// GA102's whitepaper's; the 3090 Ti's are the same arithmetic (multiprocessors
// x boost clock x 512 bf16 flops per clock with fp32 accumulation, 128 fp32)
// at its 84 and 1.86 GHz. The H20 and L20 (China's Hopper and Ada parts)
// are their datasheets'. The RTX PRO 6000 Blackwell (Workstation and Server
// Edition; the 300 W Max-Q is clocked lower, and not this row): NVIDIA's
// 125 TF fp32 and 4000 "AI TOPS" (fp4 with sparsity), an eighth of which is
// its dense bf16 rate, fp32 accumulation at full rate as on the RTX 6000 Ada.
// The H800 and A800 (China's H100 and A100) compute as those do; their
// NVLink is 400 GB/s in both directions together, 200 each way. The B300
// (Blackwell Ultra, HGX): the B200's bf16 rate (the HGX B300's 36 PF with
// sparsity over 16 dies, 8 GPUs) and 75 TF fp32; 288 GB of HBM3e (the HGX's
// 2.3 TB over 8), 268 GiB. A GB300's GPU takes its figures as a GB200's
// takes the B200's (its higher power limit's peak is 2500). Its die has 160
// multiprocessors; how many the product enables is not published where we
// could check, so the row counts 148, the B200's: a GPU reporting more
// counts as whole, and a MIG slice is then its share of 148.
// `sized_by_name`: the model comes in two memory sizes and the device's name
// states which ("NVIDIA A100-SXM4-40GB", "Tesla V100-SXM2-16GB").
// `nvlink_gbps`: NVLink bandwidth per direction to the node's switch (0: a
// PCIe card, whose bridges, where it has them, join pairs, not a node's 8);
// `pcie_gen`: the card's PCIe generation (x16), the link of its PCIe form.
// `sms`: the product's multiprocessors, those its peak counts.
struct GpuRow {
  const char* key;
  double bf16, fp32;
  int memory_gib;
  bool sized_by_name;
  int nvlink_gbps, pcie_gen, sms;
};
constexpr GpuRow kGpus[] = {
    {"H100 PCIe", 756e12, 51e12, 80, false, 0, 5, 114},   {"H100 NVL", 835e12, 60e12, 94, false, 0, 5, 132},
    {"H200 NVL", 835e12, 60e12, 141, false, 0, 5, 132},  {"GH200 144G", 989e12, 67e12, 144, false, 450, 5, 132},
    {"GH200", 989e12, 67e12, 96, false, 450, 5, 132},     {"H200", 989e12, 67e12, 141, false, 450, 5, 132},
    {"B200", 2250e12, 80e12, 180, false, 900, 6, 148},    {"H100", 989e12, 67e12, 80, false, 450, 5, 132},
    {"A100", 312e12, 19.5e12, 80, true, 300, 4, 108},     {"L40S", 362e12, 91.6e12, 48, false, 0, 4, 142},
    {"L40", 181e12, 90.5e12, 48, false, 0, 4, 142},       {"A10", 125e12, 31.2e12, 24, false, 0, 4, 72},
    {"L4", 121e12, 30.3e12, 24, false, 0, 4, 58},         {"V100", 125e12, 15.7e12, 32, true, 150, 3, 80},
    {"GB200", 2250e12, 80e12, 180, false, 900, 6, 148},   {"A40", 149.7e12, 37.4e12, 48, false, 0, 4, 84},
    {"RTX A6000", 154.8e12, 38.7e12, 48, false, 0, 4, 84}, {"RTX 6000 Ada", 364.2e12, 91.1e12, 48, false, 0, 4, 142},
    {"RTX 4090", 165.2e12, 82.6e12, 24, false, 0, 4, 128}, {"RTX 5090", 209.5e12, 104.8e12, 32, false, 0, 5, 170},
    {"H20", 148e12, 44e12, 96, false, 450, 5, 78},        {"L20", 119.5e12, 59.8e12, 48, false, 0, 4, 92},
    {"RTX 3090 Ti", 80e12, 40e12, 24, false, 0, 4, 84},   {"RTX 3090", 71e12, 35.6e12, 24, false, 0, 4, 82},
    {"RTX PRO 6000 Blackwell", 500e12, 125e12, 96, false, 0, 5, 188},
    {"H800 PCIe", 756e12, 51e12, 80, false, 0, 5, 114},  {"H800", 989e12, 67e12, 80, false, 200, 5, 132},
    {"A800", 312e12, 19.5e12, 80, true, 200, 4, 108},
    {"B300", 2250e12, 75e12, 268, false, 900, 6, 148},   {"GB300", 2250e12, 75e12, 268, false, 900, 6, 148}};
bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
std::string upper(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
// Whether `key` stands in `name` as whole words, in any case: CUDA reports
// "NVIDIA H100 80GB HBM3", a user types `plan --gpu h100` or `h100 pcie`.
bool holds_words(const std::string& name_as_given, const std::string& key_as_given) {
  const std::string name = upper(name_as_given), key = upper(key_as_given);
  for (size_t at = name.find(key); at != std::string::npos; at = name.find(key, at + 1)) {
    const size_t end = at + key.size();
    if ((at == 0 || !word_char(name[at - 1])) && (end == name.size() || !word_char(name[end]))) return true;
  }
  return false;
}
const GpuRow* find_gpu(const std::string& name) {
  if (holds_words(name, "Laptop") || holds_words(name, "Max-Q")) return nullptr;
  for (const GpuRow& row : kGpus)
    if (holds_words(name, row.key)) return &row;
  return nullptr;
}
}  // namespace

double gpu_peak_flops(const std::string& name, bool bf16, int sms) {
  const GpuRow* row = find_gpu(name);
  if (!row) return 0;
  const double peak = bf16 ? row->bf16 : row->fp32;
  return sms > 0 && sms < row->sms ? peak * sms / row->sms : peak;
}

int64_t gpu_memory_bytes(const std::string& name) {
  const GpuRow* row = find_gpu(name);
  if (!row) return 0;
  std::smatch m;
  const bool stated = row->sized_by_name && std::regex_search(name, m, std::regex("([0-9]+)GB", std::regex::icase));
  return int64_t(stated ? std::stoi(m[1]) : row->memory_gib) << 30;
}

std::string gpu_names() {
  std::string out;
  for (const GpuRow& row : kGpus) out += (out.empty() ? "" : ", ") + std::string(row.key);
  return out;
}

double gpu_ring_bandwidth(const std::string& name) {
  const GpuRow* row = find_gpu(name);
  if (!row) return 0;
  // "NVIDIA A100-PCIE-40GB", "NVIDIA A100 80GB PCIe": the PCIe form of an
  // NVLink row's GPU.
  const bool pcie = std::regex_search(name, std::regex("PCIE", std::regex::icase));
  // PCIe x16 per direction: 16 GB/s at gen 3, doubling with each generation.
  const double link = row->nvlink_gbps > 0 && !pcie ? row->nvlink_gbps : 16.0 * (1 << (row->pcie_gen - 3));
  return 0.8 * link * 1e9;
}

}  // namespace gpt

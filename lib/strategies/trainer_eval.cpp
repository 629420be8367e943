// Trainer::Impl's passes without a backward: validation (--val-data),
// HellaSwag (--hellaswag) and samples (--sample-tokens).
#include <algorithm>
#include <random>
#include <span>

#include "comm/mpi_wait.hpp"
#include "core/logging.hpp"
#include "core/timer.hpp"
#include "strategies/trainer_impl.hpp"

namespace gpt {

double Trainer::Impl::evaluate() {
  trace::Span t("eval", "eval");
  Strategy& S = *strategy;
  model->set_shape(cfg.micro_batch, cfg.seq_len);
  val_loader->seek({0, 0});
  reset_comm_stats();
  for (int b = 0; b < val_batches; ++b) {
    val_loader->micro_batch(0, tokens.data(), targets.data());
    model->set_batch(tokens.data(), targets.data());
    forward_blocks();
    model->forward_head(S.params(F()), S.params(E()), nullptr, 0.f);
    val_loader->advance();
  }
  // The batches' losses add up in the model (on a GPU, on the device): one wait for the whole validation, so the
  // host queues the next batch while the device computes this one. Every batch has micro-batch x seq-len rows.
  const double local = model->take_loss();
  // --val-batches 0: the sequences after the last whole batch too, a few on each rank (or none). Every rank runs
  // the blocks (zero3 gathers them on all ranks together); a rank with no rows runs them on the buffer's first
  // row and leaves its loss out.
  int rows = 0;
  double tail = 0;
  if (val_tail) {
    rows = val_loader->tail(tokens.data(), targets.data());
    model->set_shape(std::max(rows, 1), cfg.seq_len);
    model->set_batch(tokens.data(), targets.data());
    forward_blocks();
    if (rows > 0) {
      model->forward_head(S.params(F()), S.params(E()), nullptr, 0.f);
      tail = model->take_loss();  // the second (and last) wait of this validation
    }
    model->set_shape(cfg.micro_batch, cfg.seq_len);
  }
  release_ends();
  last_eval_bytes = comm_since_reset().bytes;
  if (!val_tail) return mean_over_ranks(local, "the validation loss mean over ranks");
  // With the tail the mean is over sequences: each rank's sums weighted by its rows.
  double sums[2] = {local * double(val_batches) * cfg.micro_batch + tail * rows,
                    double(val_batches) * cfg.micro_batch + rows};
  bounded_allreduce(sums, 2, MPI_DOUBLE, MPI_SUM, base, "the validation loss sum over ranks");
  return sums[0] / sums[1];
}

void Trainer::Impl::load_hellaswag() {
  std::vector<ChoiceExample> all =
      read_hellaswag(cfg.hellaswag, *tokenizer, cfg.gpt.vocab_size, cfg.hellaswag_examples);
  hellaswag_total = int64_t(all.size());
  int64_t truncated = 0;
  for (size_t e = 0; e < all.size(); ++e) {
    for (size_t k = 0; k < all[e].endings.size(); ++k) truncated += choice_row(all[e], int(k), cfg.seq_len).truncated;
    if (int64_t(e) % world == rank) hellaswag.push_back(std::move(all[e]));
  }
  for (size_t i = 0; i < hellaswag.size(); ++i) {
    hellaswag_first.push_back(int32_t(hellaswag_losses.size()));
    for (size_t k = 0; k < hellaswag[i].endings.size(); ++k) {
      hellaswag_rows.push_back(
          {int32_t(i), int32_t(k), int32_t(hellaswag_losses.size()), choice_row(hellaswag[i], int(k), cfg.seq_len)});
      hellaswag_losses.emplace_back();
    }
  }
  hellaswag_first.push_back(int32_t(hellaswag_losses.size()));
  std::stable_sort(hellaswag_rows.begin(), hellaswag_rows.end(),
                   [](const ChoiceRowRef& a, const ChoiceRowRef& b) { return a.row.len > b.row.len; });
  hellaswag_passes = (int64_t(hellaswag_rows.size()) + cfg.micro_batch - 1) / cfg.micro_batch;
  bounded_allreduce(&hellaswag_passes, 1, MPI_INT64_T, MPI_MAX, base, "the HellaSwag passes over ranks");
  log0("hellaswag: {} examples from {}; {} passes of up to {} x {} tokens per rank{}", hellaswag_total, cfg.hellaswag,
       hellaswag_passes, cfg.micro_batch, cfg.seq_len,
       truncated ? fmt::format("; {} endings with their context cut to the last {} tokens (--seq-len)", truncated,
                               cfg.seq_len)
                 : "");
}

Trainer::Impl::ChoiceScore Trainer::Impl::evaluate_hellaswag() {
  trace::Span t("hellaswag", "eval");
  Strategy& S = *strategy;
  const int64_t rows = int64_t(hellaswag_rows.size());
  // Pass p's rows [begin, end) and its length Tn.
  struct Pass {
    int64_t begin, end;
    int Tn;
  };
  const auto pass = [&](int64_t p) {
    const int64_t begin = std::min(rows, p * cfg.micro_batch), end = std::min(rows, begin + cfg.micro_batch);
    // Lengths rounded up to 32 bound the shapes a GPU sees (one GEMM plan each).
    const int Tn = begin == end ? 1 : std::min(cfg.seq_len, (hellaswag_rows[size_t(begin)].row.len + 31) / 32 * 32);
    return Pass{begin, end, Tn};
  };
  // Scores pass p from its row losses (copied into slot p % 2).
  const auto score = [&](int64_t p) {
    const Pass q = pass(p);
    const float* l = model->row_losses_ready(int(p % 2));
    for (int64_t r = q.begin; r < q.end; ++r) {
      const ChoiceRowRef& x = hellaswag_rows[size_t(r)];
      hellaswag_losses[size_t(x.score)] =
          ending_loss(x.row, std::span<const float>(l + (r - q.begin) * q.Tn, size_t(x.row.len)));
    }
  };
  for (int64_t p = 0; p < hellaswag_passes; ++p) {
    const Pass q = pass(p);
    // A rank out of rows makes a one-token pass: its gathers are the others'.
    const int B = std::max(1, int(q.end - q.begin));
    std::fill(tokens.begin(), tokens.begin() + int64_t(B) * q.Tn, 0);  // padding: after every row's positions
    std::fill(targets.begin(), targets.begin() + int64_t(B) * q.Tn, 0);
    for (int64_t r = q.begin; r < q.end; ++r) {
      const ChoiceRowRef& x = hellaswag_rows[size_t(r)];
      fill_choice_row(hellaswag[size_t(x.example)], x.ending, x.row, tokens.data() + (r - q.begin) * q.Tn,
                      targets.data() + (r - q.begin) * q.Tn);
    }
    model->set_shape(B, q.Tn);
    model->set_batch(tokens.data(), targets.data());
    forward_blocks();
    model->forward_head(S.params(F()), S.params(E()), nullptr, 0.f);
    model->copy_row_losses(int(p % 2));
    // The pass before is scored while this one computes: the one wait per pass is for that pass's losses.
    if (p > 0) score(p - 1);
  }
  if (hellaswag_passes > 0) score(hellaswag_passes - 1);
  model->take_loss();  // the passes' summed losses are not used: cleared once, not once a pass
  release_ends();
  model->set_shape(cfg.micro_batch, cfg.seq_len);
  int64_t right[2] = {0, 0};
  for (size_t i = 0; i < hellaswag.size(); ++i) {
    const ChoiceVerdict v = judge(
        hellaswag[i], std::span<const EndingLoss>(hellaswag_losses)
                          .subspan(size_t(hellaswag_first[i]), size_t(hellaswag_first[i + 1] - hellaswag_first[i])));
    right[0] += v.correct;
    right[1] += v.correct_norm;
  }
  bounded_allreduce(right, 2, MPI_INT64_T, MPI_SUM, base, "the HellaSwag counts over ranks");
  return {double(right[0]) / double(hellaswag_total), double(right[1]) / double(hellaswag_total)};
}

void Trainer::Impl::log_hellaswag(int step, const ChoiceScore& h, double seconds) const {
  log0("step {}: hellaswag acc_norm {:.4f} | acc {:.4f} ({} examples in {:.2f} s)", step, h.acc_norm, h.acc,
       hellaswag_total, seconds);
}

// Each evaluation's time includes its last wait for the device and the
// ranks' mean, so its tokens/s is the whole validation's.
void Trainer::Impl::evaluate_all(int step, StepRecord& rec, TrainSummary& sum) {
  if (val_loader) {
    Timer t;
    rec.val_loss = sum.final_val_loss = evaluate();
    const double s = t.seconds();
    const int64_t tokens = val_sequences() * cfg.seq_len;
    log0("step {}: val loss {:.4f} ({} tokens in {:.2f} s, {:.0f} tokens/s)", step, sum.final_val_loss, tokens, s,
         double(tokens) / std::max(s, 1e-9));
  }
  if (hellaswag_total > 0) {
    Timer t;
    const ChoiceScore h = evaluate_hellaswag();
    rec.hellaswag_acc = sum.final_hellaswag_acc = h.acc;
    rec.hellaswag_acc_norm = sum.final_hellaswag_acc_norm = h.acc_norm;
    rec.hellaswag_examples = hellaswag_total;
    log_hellaswag(step, h, t.seconds());
  }
}

void Trainer::Impl::evaluate_start(int step, TrainSummary& sum) {
  if (!val_loader && hellaswag_total == 0) return;
  Timer t;
  StepRecord ev;
  evaluate_all(step, ev, sum);
  nlohmann::json rec{{"type", "eval"}, {"step", step}};
  if (ev.val_loss) rec["val_loss"] = *ev.val_loss;
  if (ev.hellaswag_acc)
    rec["hellaswag"] = {
        {"acc", *ev.hellaswag_acc}, {"acc_norm", *ev.hellaswag_acc_norm}, {"examples", hellaswag_total}};
  rec["seconds"] = t.seconds();
  rec["elapsed_s"] = since_start.seconds();
  metrics.write(rec);
}

std::string Trainer::Impl::sample(int step) {
  trace::Span t("sample", "eval");
  Timer timer;
  reset_comm_stats();
  Strategy& S = *strategy;
  const int V = cfg.gpt.vocab_size;
  std::vector<int32_t> ctx = sample_context;
  std::vector<int> out(sample_context.begin() + 1, sample_context.end());  // the prompt, then what follows
  std::vector<float> logits(size_t(cfg.gpt.padded_vocab()));
  std::mt19937_64 rng(cfg.seed + uint64_t(step));
  // While the context fits in seq_len, the model's key/value cache makes
  // each token after the first pass one position's work. Past seq_len the
  // window slides, every position moves, and each token is a whole pass
  // over the last seq_len tokens (as nanoGPT's generate).
  bool cached = false;
  for (int i = 0; i < cfg.sample_tokens; ++i) {
    const int len = static_cast<int>(std::min<size_t>(ctx.size(), size_t(cfg.seq_len)));
    if (i == 0 && ctx.size() <= size_t(cfg.seq_len)) cached = model->set_decode(0);
    if (cached && ctx.size() > size_t(cfg.seq_len)) {
      model->set_decode(-1);
      cached = false;
    }
    const int first = cached && i > 0 ? len - 1 : 0;  // the pass's positions: [first, len)
    if (cached && i > 0) model->set_decode(first);
    model->set_shape(1, len - first);
    model->set_batch(ctx.data() + ctx.size() - (len - first), nullptr);
    forward_blocks();
    model->logits_row(S.params(F()), S.params(E()), len - first - 1, logits.data());
    const int next = sampler.next(logits.data(), V, rng);
    ctx.push_back(next);
    out.push_back(next);
  }
  release_ends();
  model->set_decode(-1);
  model->set_shape(cfg.micro_batch, cfg.seq_len);
  last_sample_bytes = comm_since_reset().bytes;
  last_sample_s = timer.seconds();
  return tokenizer->decode(out);
}

void Trainer::Impl::report_sample(int step, const std::string& text) {
  log0("sample at step {}:\n{}", step, text);
  log0("sampled {} tokens at step {} in {:.2f} s ({:.1f} tokens/s), {:.2f} MiB communicated per rank",
       cfg.sample_tokens, step, last_sample_s, cfg.sample_tokens / std::max(last_sample_s, 1e-9),
       double(last_sample_bytes) / 1048576.0);
  metrics.write({{"type", "sample"},
                 {"step", step},
                 {"text", text},
                 {"prompt", cfg.sample_prompt},
                 {"tokens", cfg.sample_tokens},
                 {"temperature", std::stod(fmt::format("{}", cfg.sample_temperature))},
                 {"top_k", cfg.sample_top_k},
                 {"seconds", last_sample_s},
                 {"comm_bytes", last_sample_bytes}});
}

}  // namespace gpt

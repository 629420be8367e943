// HellaSwag (Zellers et al., 2019) as a language model takes it, the way
// llm.c and lm-evaluation-harness score GPT-2: an example is a context and K
// endings (4 in HellaSwag), one of them right; the model's score of an ending
// is its cross-entropy on the ending's tokens, each predicted from the
// context and the ending's tokens before it. Two accuracies:
//   acc       the ending of least summed loss (highest log-likelihood) wins;
//   acc_norm  the ending of least mean loss per token wins (llm.c's
//             acc_norm; lm-evaluation-harness divides by the ending's bytes
//             instead, so its acc_norm can differ slightly).
// Ties go to the lower ending index. Chance is 1/K (0.25); OpenAI's GPT-2
// 124M scores acc_norm near 0.295 on the 10042 validation examples.
//
// This file: reading the data (HellaSwag's JSON lines), laying an ending out
// as one row of a forward pass, and scoring rows from their per-position
// losses. Running the passes is the trainer's (strategies/trainer_eval.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "io/tokenizer.hpp"

namespace gpt {

struct ChoiceExample {
  std::vector<int32_t> context;               // tokens of "ctx"
  std::vector<std::vector<int32_t>> endings;  // tokens of " " + each of "endings"
  int label = 0;                              // index of the right ending
};

// HellaSwag's JSON lines (hellaswag_val.jsonl, one object per line with
// "ctx": string, "endings": array of >= 2 strings, "label": integer index;
// other keys ignored; blank lines skipped), tokenised with `tok`. At most
// `limit` examples, the file's first (0: all). Throws DataError naming the
// file and line for unreadable files, bad JSON, missing or mistyped keys, a
// label out of range, an empty context or ending, or a token id >= vocab_size.
std::vector<ChoiceExample> read_hellaswag(const std::string& path, const Tokenizer& tok, int vocab_size,
                                          int64_t limit = 0);

// Where ending `e` of an example sits in a pass of at most max_len positions.
// The sequence s = context ++ ending (n tokens) gives n - 1 (input, target)
// pairs: position i reads s[i] and predicts s[i + 1]. When they exceed
// max_len, the first ones are dropped (the context is cut from the left; an
// ending longer than max_len - 1 loses its first tokens too).
struct ChoiceRow {
  int64_t start = 0;       // first pair's index in s
  int len = 0;             // pairs in the row (<= max_len)
  int first_scored = 0;    // positions [first_scored, len) predict the ending's tokens
  bool truncated = false;  // pairs were dropped
};
ChoiceRow choice_row(const ChoiceExample& ex, int ending, int max_len);

// Writes the row's tokens and targets into tokens[0, len), targets[0, len).
void fill_choice_row(const ChoiceExample& ex, int ending, const ChoiceRow& row, int32_t* tokens, int32_t* targets);

// The ending's loss from the row's per-position losses (losses[0, len)):
// sum over the scored positions, and their count.
struct EndingLoss {
  double sum = 0;
  int tokens = 0;
};
EndingLoss ending_loss(const ChoiceRow& row, std::span<const float> losses);

// Whether the example's label wins under each rule (losses[k]: ending k).
struct ChoiceVerdict {
  bool correct = false, correct_norm = false;
};
ChoiceVerdict judge(const ChoiceExample& ex, std::span<const EndingLoss> losses);

}  // namespace gpt

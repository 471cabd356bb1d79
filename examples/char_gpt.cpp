// A character-level GPT trained on the GNU GPL version 3 (every Debian system has it, in
// /usr/share/common-licenses/GPL-3), written as a PyTorch user would: token and position
// embeddings, pre-LayerNorm blocks of causal self-attention (scaled_dot_product_attention) and
// a GELU MLP, AdamW with gradient clipping by global norm, one mark_step per step. Prints the
// loss every few steps, the tokens per second, a greedy continuation of a prompt, lazyjit's
// metrics and checks (the loss falls below a bound; no new graph after the second step; every
// parameter and AdamW state buffer updated in place); exits 1 if one fails.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <lazyjit/lazyjit.h>

using lazyjit::Tensor;

namespace {

constexpr const char* kDefaultTextPath = "/usr/share/common-licenses/GPL-3";
constexpr int64_t kSeq = 64, kBatch = 16, kModel = 128, kHeads = 4, kLayers = 2, kHidden = 4 * kModel;
constexpr int kSteps = 300, kReportEvery = 25, kSampleChars = 160;
constexpr double kLearningRate = 3e-3, kWeightDecay = 0.01, kMaxGradNorm = 1.0;
constexpr double kMaxFinalLoss = 2.2;  // the mean of the last 25 steps; ln(vocabulary) ~ 4.4 at the start
constexpr uint64_t kSeed = 42;

/// The text's distinct bytes, in order, as the vocabulary.
struct Vocabulary {
  std::vector<char> chars;
  int64_t id[256] = {};

  explicit Vocabulary(std::string_view text) {
    bool seen[256] = {};
    for (char c : text) seen[static_cast<unsigned char>(c)] = true;
    for (int c = 0; c < 256; ++c) {
      if (!seen[c]) continue;
      id[c] = static_cast<int64_t>(chars.size());
      chars.push_back(static_cast<char>(c));
    }
  }
  int64_t size() const { return static_cast<int64_t>(chars.size()); }
};

/// One pre-LayerNorm transformer block: x + attention(ln(x)), then + mlp(ln(.)).
struct Block {
  lazyjit::nn::LayerNorm ln1{{kModel}}, ln2{{kModel}};
  lazyjit::nn::Linear qkv, proj, fc, out;

  explicit Block(uint64_t seed)
      : qkv(kModel, 3 * kModel, seed), proj(kModel, kModel, seed + 1), fc(kModel, kHidden, seed + 2),
        out(kHidden, kModel, seed + 3) {}

  /// x [batch, seq, kModel].
  Tensor operator()(const Tensor& x) const {
    const int64_t batch = x.shape()[0], seq = x.shape()[1];
    const Tensor q_k_v = qkv(ln1(x));
    auto heads = [&](int64_t i) {  // [batch, kHeads, seq, kModel / kHeads]
      const Tensor part = lazyjit::slice(q_k_v, -1, i * kModel, (i + 1) * kModel);
      return lazyjit::transpose(lazyjit::reshape(part, {batch, seq, kHeads, kModel / kHeads}), 1, 2);
    };
    const Tensor attended = lazyjit::scaled_dot_product_attention(heads(0), heads(1), heads(2), /*is_causal=*/true);
    const Tensor h = x + proj(lazyjit::reshape(lazyjit::transpose(attended, 1, 2), {batch, seq, kModel}));
    return h + out(lazyjit::gelu(fc(ln2(h))));
  }

  void collect(std::vector<Tensor>& params) const {
    for (const auto& layer : {ln1.parameters(), qkv.parameters(), proj.parameters(), ln2.parameters(),
                              fc.parameters(), out.parameters()}) {
      params.insert(params.end(), layer.begin(), layer.end());
    }
  }
};

struct Gpt {
  lazyjit::nn::Embedding tokens, positions;
  std::vector<Block> blocks;
  lazyjit::nn::LayerNorm ln{{kModel}};
  lazyjit::nn::Linear head;

  explicit Gpt(int64_t vocabulary)
      : tokens(vocabulary, kModel, kSeed), positions(kSeq, kModel, kSeed + 1), head(kModel, vocabulary, kSeed + 2) {
    for (int64_t l = 0; l < kLayers; ++l) blocks.emplace_back(kSeed + 10 + 10 * static_cast<uint64_t>(l));
  }

  /// ids [batch, seq] (int64) to logits [batch, seq, vocabulary].
  Tensor operator()(const Tensor& ids) const {
    const int64_t seq = ids.shape()[1];
    Tensor h = tokens(ids) + positions(lazyjit::arange(seq, lazyjit::DType::Int64));
    for (const Block& block : blocks) h = block(h);
    return head(ln(h));
  }

  std::vector<Tensor> parameters() const {
    std::vector<Tensor> params = {tokens.weight, positions.weight};
    for (const Block& block : blocks) block.collect(params);
    for (const auto& layer : {ln.parameters(), head.parameters()}) params.insert(params.end(), layer.begin(), layer.end());
    return params;
  }
};

/// kBatch windows of kSeq + 1 characters at seeded offsets: inputs and next-character targets.
struct Batch {
  Tensor x, y;
};
Batch sample_batch(const std::vector<int64_t>& ids, std::mt19937_64& rng) {
  std::vector<int64_t> x, y;
  const uint64_t starts = ids.size() - kSeq - 1;
  for (int64_t b = 0; b < kBatch; ++b) {
    const auto start = static_cast<int64_t>(rng() % starts);
    x.insert(x.end(), ids.begin() + start, ids.begin() + start + kSeq);
    y.insert(y.end(), ids.begin() + start + 1, ids.begin() + start + kSeq + 1);
  }
  return {Tensor::from_vector(x, {kBatch, kSeq}), Tensor::from_vector(y, {kBatch * kSeq})};
}

/// `count` characters after `prompt` (at least kSeq of them), each the argmax of the logits at
/// the last position of the last kSeq characters (one graph, compiled once, for every step).
std::string continue_text(const Gpt& model, const Vocabulary& vocab, std::vector<int64_t> context, int count) {
  std::string text;
  for (int i = 0; i < count; ++i) {
    const Tensor window = Tensor::from_vector(std::vector<int64_t>(context.end() - kSeq, context.end()), {1, kSeq});
    const Tensor last = lazyjit::slice(model(window), 1, kSeq - 1, kSeq);
    const int64_t next = lazyjit::argmax(lazyjit::reshape(last, {-1}), 0).item<int64_t>();
    context.push_back(next);
    text.push_back(vocab.chars[static_cast<size_t>(next)]);
  }
  return text;
}

int run(const std::string& text) {
  const Vocabulary vocab(text);
  std::vector<int64_t> ids;
  for (char c : text) ids.push_back(vocab.id[static_cast<unsigned char>(c)]);
  if (static_cast<int64_t>(ids.size()) < 2 * kSeq + 2) {
    std::fprintf(stderr, "char_gpt: the text has %zu characters, too few for windows of %lld\n", ids.size(),
                 static_cast<long long>(kSeq));
    return 2;
  }
  Gpt model(vocab.size());
  const std::vector<Tensor> params = model.parameters();
  int64_t weights = 0;
  for (const Tensor& p : params) weights += p.numel();
  lazyjit::optim::AdamW opt(params, {.lr = kLearningRate, .weight_decay = kWeightDecay});
  std::printf("text: %zu characters, vocabulary %lld\n", text.size(), static_cast<long long>(vocab.size()));
  std::printf("model: %lld layers, d_model %lld, %lld heads, context %lld; %lld parameters; AdamW lr %g, clip %g; "
              "batch %lld\n\n",
              static_cast<long long>(kLayers), static_cast<long long>(kModel), static_cast<long long>(kHeads),
              static_cast<long long>(kSeq), static_cast<long long>(weights), kLearningRate, kMaxGradNorm,
              static_cast<long long>(kBatch));

  std::mt19937_64 rng(kSeed);
  lazyjit::wait_for_compiles();  // none queued: the initialisers' graphs ran once, never compiled
  const lazyjit::Metrics before = lazyjit::metrics();
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::vector<double> losses;
  int64_t donations_last_step = 0;
  for (int step = 1; step <= kSteps; ++step) {
    const Batch batch = sample_batch(ids, rng);
    const Tensor logits = model(batch.x);
    Tensor loss = lazyjit::nn::cross_entropy(lazyjit::reshape(logits, {kBatch * kSeq, vocab.size()}), batch.y);
    loss.backward();
    lazyjit::nn::clip_grad_norm_(params, kMaxGradNorm);
    opt.step();
    opt.zero_grad();
    const int64_t donations = lazyjit::metrics().donations;
    lazyjit::mark_step();
    donations_last_step = lazyjit::metrics().donations - donations;
    losses.push_back(loss.item<float>());
    if (step % kReportEvery == 0 || step == 1) {
      std::printf("step %4d  loss %.4f  %8.0f tokens/s\n", step, losses.back(),
                  static_cast<double>(step * kBatch * kSeq) / seconds());
    }
  }
  const double train_seconds = seconds();
  const lazyjit::Metrics after_training = lazyjit::metrics();

  const std::string prompt = "This License";
  const auto at = text.find(prompt);
  const size_t begin = at == std::string::npos || at < static_cast<size_t>(kSeq) ? kSeq : at + prompt.size();
  const std::vector<int64_t> context(ids.begin() + static_cast<int64_t>(begin) - kSeq, ids.begin() + static_cast<int64_t>(begin));
  std::printf("\n%lld steps in %.2f s: %.0f tokens/s\n\nprompt: ...%s\ncontinuation: %s\n\n",
              static_cast<long long>(kSteps), train_seconds, static_cast<double>(kSteps * kBatch * kSeq) / train_seconds,
              text.substr(begin - 40, 40).c_str(), continue_text(model, vocab, context, kSampleChars).c_str());
  std::printf("%s\n", lazyjit::metrics_report().c_str());

  double tail = 0;
  for (size_t i = losses.size() - kReportEvery; i < losses.size(); ++i) tail += losses[i];
  tail /= kReportEvery;
  const bool learned = tail < kMaxFinalLoss;
  // New graphs, each planned and lowered once: the first step's and the later steps' (whose
  // inputs include the optimiser's state). More would be a recompilation storm. Their kernels
  // compile in the background as tier 0's time pays for it (on two cores, the hot ones).
  const int64_t graphs = after_training.graphs_planned - before.graphs_planned;
  const int64_t kernels = after_training.kernels_compiled - before.kernels_compiled;
  const bool no_recompiles = graphs <= 2;
  const bool donated = donations_last_step == static_cast<int64_t>(params.size() + opt.state().size());
  auto verdict = [](bool ok) { return ok ? "ok" : "FAILED"; };
  std::printf("checks:\n");
  std::printf("  mean loss of the last %d steps %.4f < %.1f: %s\n", kReportEvery, tail, kMaxFinalLoss, verdict(learned));
  std::printf("  %d steps: %lld new graph(s), %lld kernels compiled: %s\n", kSteps, static_cast<long long>(graphs),
              static_cast<long long>(kernels), verdict(no_recompiles));
  std::printf("  %lld donations per step = %zu parameters + %zu AdamW state buffers: %s\n",
              static_cast<long long>(donations_last_step), params.size(), opt.state().size(), verdict(donated));
  return learned && no_recompiles && donated ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = kDefaultTextPath;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (!arg.starts_with("--text=")) {
      std::fprintf(stderr, "usage: char_gpt [--text=PATH]   (default: %s)\n", kDefaultTextPath);
      return 2;
    }
    path = arg.substr(std::string_view("--text=").size());
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    std::fprintf(stderr, "char_gpt: cannot read %s (Debian's base-files package installs it)\n", path.c_str());
    return 2;
  }
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  try {
    return run(text);
  } catch (const lazyjit::Error& e) {
    std::fprintf(stderr, "char_gpt: %s\n", e.what());
    return 1;
  }
}

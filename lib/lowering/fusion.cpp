// Kernel planning: boundaries (reductions, matmuls), result groups, row and epilogue fusion.
#include "lowering/fusion.h"

#include <algorithm>

#include "fmt/format.h"
#include "ir/structured.h"

namespace lazyjit::lowering {
namespace {

using ir::AccessPattern;
using ir::OpKind;

AccessPattern access_of(const ir::Graph& graph, int n) { return ir::op_info(graph.nodes[n]->op()).access; }

/// The dims a reduction folds.
std::vector<int> folded_dims(const ir::Node& node) {
  if (node.op() == OpKind::Argmax) return {static_cast<int>(node.attrs()[0])};
  return std::vector<int>(node.attrs().begin(), node.attrs().end());
}

/// Whether computing `node` in a kernel computes an op that `is`: what it computes up to the
/// values in memory (parameters, boundaries, cuts) holds one.
template <class Predicate>
bool computes_any(const ir::Graph& graph, const std::vector<bool>& cuts, int node, Predicate is) {
  std::vector<int> stack = {node};
  std::vector<bool> seen(graph.nodes.size(), false);
  while (!stack.empty()) {
    const int i = stack.back();
    stack.pop_back();
    if (seen[i] || graph.parameter_slot[i] >= 0 || is_boundary(graph, i) || (cuts[i] && i != node)) continue;
    seen[i] = true;
    if (is(graph.nodes[i]->op())) return true;
    for (int operand : graph.operands[i]) stack.push_back(operand);
  }
  return false;
}

/// Whether computing `node` in a kernel calls a math function (exp, erf, ...).
bool computes_math(const ir::Graph& graph, const std::vector<bool>& cuts, int node) {
  return computes_any(graph, cuts, node, [](OpKind op) { return ir::calls_math(op); });
}

/// Whether `node` is cheap enough to compute in a product's epilogue, tile row by tile row:
/// no math functions and no reads picked by data (a gather) or by part (a cat). Either ran
/// slower there than as a pass of its own over the stored product, on both tiers (a GPT
/// step's gelu gradient, its token embeddings added to the residual stream).
bool epilogue_cheap(const ir::Graph& graph, const std::vector<bool>& cuts, int node) {
  return !computes_any(graph, cuts, node, [](OpKind op) {
    return ir::calls_math(op) || op == OpKind::IndexSelect || op == OpKind::Gather || op == OpKind::OneHot ||
           op == OpKind::Cat;
  });
}

/// The value a product's operand views (through permutes, reshapes, expands and slices).
int viewed_value(const ir::Graph& graph, int node) {
  for (;;) {
    const OpKind op = graph.nodes[node]->op();
    if (op != OpKind::Permute && op != OpKind::Reshape && op != OpKind::Expand && op != OpKind::Slice) return node;
    node = graph.operands[node][0];
  }
}

/// Whether matmul `product` packs its left operand (a PackA kernel): not when it is read in
/// place (left_in_place).
bool packs_left(const ir::Graph& graph, const std::vector<bool>& cuts, int product) {
  return left_in_place(graph, cuts, product) < 0;
}

class Planner {
 public:
  Planner(const ir::Graph& graph)
      : graph_(graph), n_(static_cast<int>(graph.nodes.size())), users_(n_), cuts_(chain_cuts(graph)) {
    for (int i = 0; i < n_; ++i) {
      for (int operand : graph.operands[i]) users_[operand].push_back(i);
      if (access_of(graph, i) != AccessPattern::Matmul) continue;
      for (int side : {0, 1}) {
        const int base = window_in_place(graph, i, side);  // read where it lies: it needs a buffer
        if (base >= 0 && graph.parameter_slot[base] < 0 && !is_boundary(graph, base)) cuts_[base] = true;
      }
    }
    // A product's operand computed with math functions and read by other ops too (an MLP's
    // gelu(h): the next layer's product, and x^T of its weight gradient) is stored once.
    // Recomputed, every pack would call the math functions again, a transposed pack one
    // element at a time; stored, they run once, vectorised.
    for (int i = 0; i < n_; ++i) {
      if (access_of(graph, i) != AccessPattern::Matmul) continue;
      for (int side : {0, 1}) {
        const int value = viewed_value(graph, graph.operands[i][side]);
        if (access_of(graph, value) == AccessPattern::Elementwise && users_[value].size() >= 2 &&
            computes_math(graph, cuts_, value)) {
          cuts_[value] = true;
        }
      }
    }
    result_of_.assign(n_, -1);
    for (size_t r = graph.roots.size(); r-- > 0;) result_of_[stored_value(graph, graph.roots[r])] = static_cast<int>(r);
  }

  KernelPlan plan() {
    draft_kernels();
    for (size_t k = 0; k < drafts_.size(); ++k) {
      if (drafts_[k].group >= 0) fuse_into(k);
      if (drafts_[k].spec.cut >= 0) fuse_product_into_cut(k);
    }
    return finish();
  }

 private:
  struct Draft {
    KernelSpec spec;
    int group = -1;   // result kernels: the shape class of their results
    int owner = -1;   // a boundary's own kernel: the boundary node
    bool alive = true;
  };

  void draft_kernels() {
    for (int i = 0; i < n_; ++i) {
      if (cuts_[i]) add({KernelKind::Elementwise, i}, -1, i).spec.cut = i;
      if (!is_boundary(graph_, i)) continue;
      const AccessPattern access = access_of(graph_, i);
      if (access == AccessPattern::Matmul) {
        if (packs_left(graph_, cuts_, i)) add({KernelKind::PackA, i}, -1, i);
        add({window_in_place(graph_, i, 1) >= 0 ? KernelKind::RowsOfB : KernelKind::PackB, i}, -1, i);
        add({KernelKind::Matmul, i}, -1, i);
      } else if (access == AccessPattern::Scan || access == AccessPattern::Scatter || access == AccessPattern::Collective) {
        const KernelKind kind = access == AccessPattern::Scan      ? KernelKind::Scan
                                : access == AccessPattern::Scatter ? KernelKind::Scatter
                                                                   : KernelKind::Collective;
        add({kind, i}, -1, i).spec.stages = {i};
      } else {
        Draft& d = add({KernelKind::Rows, graph_.operands[i][0]}, -1, i);
        d.spec.reduced = folded_dims(*graph_.nodes[i]);
        d.spec.stages = {i};
      }
      for (size_t r = 0; r < graph_.roots.size(); ++r) {
        if (stored_value(graph_, graph_.roots[r]) == i) drafts_.back().spec.results.push_back(static_cast<int>(r));
      }
    }
    std::vector<int> kernel_of_class(graph_.roots.size(), -1);
    for (size_t r = 0; r < graph_.roots.size(); ++r) {
      if (is_boundary(graph_, stored_value(graph_, graph_.roots[r]))) continue;
      const int shape_class = graph_.root_shape_class[r];
      int& k = kernel_of_class[shape_class];
      if (k < 0) {
        k = static_cast<int>(drafts_.size());
        add({KernelKind::Elementwise, graph_.roots[r]}, shape_class, -1);
      }
      drafts_[k].spec.results.push_back(static_cast<int>(r));
    }
  }

  Draft& add(std::pair<KernelKind, int> kind_and_domain, int group, int owner) {
    Draft& d = drafts_.emplace_back();
    d.spec.kind = kind_and_domain.first;
    d.spec.domain = kind_and_domain.second;
    d.group = group;
    d.owner = owner;
    return d;
  }

  /// Whether `spec` computes node `n` itself (rather than reading it from a buffer).
  bool computes(const KernelSpec& spec, int n) const {
    if (cuts_[n]) return spec.cut == n;
    if (!is_boundary(graph_, n)) return true;
    return std::find(spec.stages.begin(), spec.stages.end(), n) != spec.stages.end();
  }

  std::vector<bool> region(const KernelSpec& spec) const { return region_of(graph_, cuts_, spec); }

  /// Nodes evaluated only at (a broadcast of) the domain's element index: the results, the
  /// stages' operands, and what they reach through elementwise ops, unless a view computed in
  /// the kernel also reaches them (a transpose of a softmax evaluates the softmax's nodes at
  /// other elements: a stage read there would give another row's value, and a donated buffer
  /// read there may already be overwritten).
  /// `in` is the kernel's region.
  std::vector<bool> direct(const KernelSpec& spec, const std::vector<bool>& in) const {
    std::vector<bool> computed(n_, false);
    for (int i = 0; i < n_; ++i) computed[i] = in[i] && computes(spec, i);
    const std::vector<bool> elsewhere = read_elsewhere(graph_, computed);
    std::vector<bool> direct(n_, false);
    std::vector<int> stack;
    for (int r : spec.results) stack.push_back(graph_.roots[r]);
    for (int s : spec.stages) stack.push_back(graph_.operands[s][0]);
    if (spec.cut >= 0) stack.push_back(spec.cut);
    while (!stack.empty()) {
      const int i = stack.back();
      stack.pop_back();
      if (direct[i]) continue;
      direct[i] = true;
      if (access_of(graph_, i) != AccessPattern::Elementwise || (cuts_[i] && i != spec.cut)) continue;
      for (int operand : graph_.operands[i]) stack.push_back(operand);
    }
    for (int i = 0; i < n_; ++i) direct[i] = direct[i] && !elsewhere[i];
    return direct;
  }

  /// Whether boundary `b` can be computed inside result kernel `k`: every user of b is
  /// evaluated by k alone (others may read a user that is stored: a cut or a boundary), at
  /// the element index, or is one of k's stages.
  bool readers_all_in(size_t k, int b) const {
    const KernelSpec& spec = drafts_[k].spec;
    const std::vector<bool> mine = region(spec);
    const std::vector<bool> at_element = direct(spec, mine);
    for (size_t other = 0; other < drafts_.size(); ++other) {
      if (other == k || !drafts_[other].alive || drafts_[other].owner == b) continue;
      const std::vector<bool> theirs = region(drafts_[other].spec);
      for (int u : users_[b]) {
        if (theirs[u] && computes(drafts_[other].spec, u)) return false;
      }
    }
    for (int u : users_[b]) {
      const bool stage = std::find(spec.stages.begin(), spec.stages.end(), u) != spec.stages.end();
      if (!mine[u] || !(stage || (at_element[u] && access_of(graph_, u) == AccessPattern::Elementwise))) return false;
    }
    return true;
  }

  /// The first dim of the innermost run `dims` folds, or -1 when they are not the innermost
  /// dims of a rank-`rank` domain (or fold everything: one row would leave no parallelism).
  static int suffix_start(const std::vector<int>& dims, int rank) {
    if (dims.empty() || dims.back() != rank - 1) return -1;
    for (size_t i = 1; i < dims.size(); ++i) {
      if (dims[i] != dims[i - 1] + 1) return -1;
    }
    return dims.front() >= 1 ? dims.front() : -1;
  }

  void fuse_into(size_t k) {
    for (bool changed = true; changed;) {
      changed = false;
      Draft& group = drafts_[k];
      const int domain_rank = graph_.nodes[group.spec.domain]->rank();
      for (size_t b_kernel = 0; b_kernel < drafts_.size() && !changed; ++b_kernel) {
        Draft& owner = drafts_[b_kernel];
        const int b = owner.owner;
        if (!owner.alive || b < 0 || !owner.spec.results.empty()) continue;
        if (owner.spec.kind == KernelKind::Rows && group.spec.kind != KernelKind::Matmul) {
          const int start = suffix_start(owner.spec.reduced, domain_rank);
          const int current = group.spec.reduced.empty() ? start : group.spec.reduced.front();
          if (start < 0 || start != current || graph_.root_class_of[graph_.operands[b][0]] != group.group) continue;
          if (!readers_all_in(k, b)) continue;
          group.spec.kind = KernelKind::Rows;
          group.spec.reduced = owner.spec.reduced;
          group.spec.stages.push_back(b);
          std::sort(group.spec.stages.begin(), group.spec.stages.end());
        } else if (owner.spec.kind == KernelKind::Matmul && group.spec.kind == KernelKind::Elementwise) {
          if (graph_.root_class_of[b] != group.group || !readers_all_in(k, b)) continue;
          group.spec.kind = KernelKind::Matmul;
          group.spec.domain = b;
        } else {
          continue;
        }
        owner.alive = false;
        changed = true;
      }
    }
  }

  /// A cut of a product's shape that alone reads the product (an MLP's `x @ w + b`, kept for
  /// its activation and its gradient) is stored by the product's epilogue where it is cheap
  /// there (epilogue_cheap): its own kernel would read the product back from memory.
  void fuse_product_into_cut(size_t k) {
    Draft& cut = drafts_[k];
    if (!epilogue_cheap(graph_, cuts_, cut.spec.cut)) return;
    const ir::Node& value = *graph_.nodes[cut.spec.cut];
    const std::vector<bool> reads = region(cut.spec);  // the products it reads: the candidates
    for (Draft& owner : drafts_) {
      // b: what the product's kernel stores (the product, or its epilogue's value: x @ w * alpha)
      const int b = owner.owner;
      if (!owner.alive || owner.spec.kind != KernelKind::Matmul || !owner.spec.results.empty() || !reads[b]) continue;
      const int product = owner.spec.domain;
      if (graph_.nodes[product]->shape() != value.shape() || !readers_all_in(k, b)) continue;
      if (b != product) {  // b is no longer stored: the cut's epilogue computes it, cheaply too
        cuts_[b] = false;
        if (!epilogue_cheap(graph_, cuts_, cut.spec.cut)) {
          cuts_[b] = true;
          continue;
        }
      }
      cut.spec.kind = KernelKind::Matmul;
      cut.spec.domain = product;
      owner.alive = false;
      return;
    }
  }

  KernelPlan finish() {
    KernelPlan plan;
    plan.buffer_of.assign(n_, -1);
    plan.cuts = cuts_;
    const int num_parameters = static_cast<int>(graph_.parameters.size());
    const int num_results = static_cast<int>(graph_.roots.size());
    for (int i = 0; i < n_; ++i) {
      if (graph_.parameter_slot[i] >= 0) plan.buffer_of[i] = graph_.parameter_slot[i];
    }
    for (Draft& d : drafts_) {
      if (!d.alive) continue;
      KernelSpec& spec = d.spec;
      const int b = d.owner;
      if (spec.kind == KernelKind::PackA || spec.kind == KernelKind::PackB || spec.kind == KernelKind::RowsOfB) {
        spec.temps.push_back(static_cast<int>(plan.temps.size()));
        plan.temps.push_back({spec.kind == KernelKind::PackA   ? TempBuffer::Kind::PackedA
                              : spec.kind == KernelKind::PackB ? TempBuffer::Kind::PackedB
                                                               : TempBuffer::Kind::RowsOfB,
                              b});
      } else if (b >= 0 && (spec.kind != KernelKind::Elementwise || spec.cut >= 0)) {
        if (result_of_[b] >= 0 && spec.cut < 0) {  // a cut that is a result: its group kernel copies it
          plan.buffer_of[b] = num_parameters + result_of_[b];
        } else {
          spec.temps.push_back(static_cast<int>(plan.temps.size()));
          plan.buffer_of[b] = temp_buffer_index(num_parameters, num_results, static_cast<int>(plan.temps.size()));
          plan.temps.push_back({TempBuffer::Kind::Value, b});
        }
        if (spec.kind == KernelKind::Collective && !collective_in_place(graph_.nodes[b]->op())) {
          spec.temps.push_back(static_cast<int>(plan.temps.size()));
          plan.temps.push_back({TempBuffer::Kind::Staging, b});
        }
      }
      describe_reads(spec);
      if (spec.kind == KernelKind::Collective) ++plan.collectives;
      plan.kernels.push_back(std::move(spec));
    }
    return plan;
  }

  /// Whether kernel `spec` reads parameter `p` only at the element it writes: each value
  /// computed from p (in the region `in`, by this kernel) up to the kernel's stages is an
  /// elementwise op at the element of p's own shape. A stage reads its row whole before the
  /// row is written; a broadcast reads other elements (p[j] in a sum over j of row i).
  bool read_at_element(const KernelSpec& spec, const std::vector<bool>& in, const std::vector<bool>& at_element,
                       int p) const {
    std::vector<int> stack = {p};
    std::vector<bool> seen(n_, false);
    while (!stack.empty()) {
      const int v = stack.back();
      stack.pop_back();
      for (int u : users_[v]) {
        if (seen[u] || !in[u] || !computes(spec, u)) continue;
        seen[u] = true;
        if (std::find(spec.stages.begin(), spec.stages.end(), u) != spec.stages.end()) continue;
        if (!at_element[u] || access_of(graph_, u) != AccessPattern::Elementwise ||
            graph_.nodes[u]->shape() != graph_.nodes[p]->shape()) {
          return false;
        }
        stack.push_back(u);
      }
    }
    return true;
  }

  void describe_reads(KernelSpec& spec) const {
    const std::vector<bool> in = region(spec);
    const std::vector<bool> at_element = direct(spec, in);
    spec.collapsed = spec.kind == KernelKind::Elementwise;
    for (int i = 0; i < n_; ++i) {
      if (!in[i]) continue;
      const ir::OpKind op = graph_.nodes[i]->op();
      const AccessPattern kind = access_of(graph_, i);
      if (op == OpKind::Rand || op == OpKind::Randn || (kind != AccessPattern::Leaf && kind != AccessPattern::Elementwise) ||
          (cuts_[i] && i != spec.cut)) {
        spec.collapsed = false;  // the collapsed loop nest computes every node; it reads no temporaries
      }
      const int slot = graph_.parameter_slot[i];
      if (slot < 0 || std::find(spec.reads.begin(), spec.reads.end(), slot) != spec.reads.end()) continue;
      spec.reads.push_back(slot);
      const bool packs = spec.kind == KernelKind::PackA || spec.kind == KernelKind::PackB;
      if (!packs && read_at_element(spec, in, at_element, i)) spec.direct_reads.push_back(slot);
    }
    if (spec.kind == KernelKind::Matmul) {  // operands in a parameter's buffer are read in place, whole rows
      std::erase(spec.direct_reads, graph_.parameter_slot[graph_.operands[spec.domain][0]]);
      for (int side : {0, 1}) {
        const int base = window_in_place(graph_, spec.domain, side);
        if (base >= 0) std::erase(spec.direct_reads, graph_.parameter_slot[base]);
      }
    }
  }

  const ir::Graph& graph_;
  int n_;
  std::vector<std::vector<int>> users_;
  std::vector<int> result_of_;
  std::vector<bool> cuts_;
  std::vector<Draft> drafts_;
};

}  // namespace

KernelPlan plan_kernels(const ir::Graph& graph) {
  return Planner(graph).plan();
}

std::vector<bool> chain_cuts(const ir::Graph& graph) {
  const size_t n = graph.nodes.size();
  std::vector<bool> cuts(n, false);
  std::vector<int> depth(n, 0);  // ops computed in a row up to the node, within one kernel
  std::vector<int> users(n, 0);
  for (const auto& operands : graph.operands) {
    for (int operand : operands) ++users[operand];
  }
  // The values in memory a node's kernel would read to compute it: the one such value
  // (parameter, product, cut) when there is one, -1 for none, -2 for several. Reductions do
  // not count: most become row stages of the kernel that reads them (x - max in softmax).
  std::vector<int> stream(n, -1);
  for (size_t i = 0; i < n; ++i) {
    const AccessPattern kind = ir::op_info(graph.nodes[i]->op()).access;
    const bool stored = graph.parameter_slot[i] >= 0 || (kind != AccessPattern::Leaf && kind != AccessPattern::Fold);
    if (kind != AccessPattern::Elementwise && kind != AccessPattern::IndexMap) {
      stream[i] = stored ? static_cast<int>(i) : -1;
      continue;
    }
    int deepest = 0;
    for (int operand : graph.operands[i]) {
      deepest = std::max(deepest, depth[operand]);
      const int s = stream[operand];
      if (s == -1 || s == stream[i]) continue;
      stream[i] = stream[i] == -1 ? s : -2;
    }
    depth[i] = deepest + 1;
    // A value that merges several streams (a residual stream: x + attention + MLP; the cat
    // of q's, k's and v's gradients) and that several ops read is stored once: recomputed,
    // every later kernel would recompute the whole sum, and the kernels of equal transformer
    // blocks would differ by their depth.
    const bool merges = (kind == AccessPattern::Elementwise || graph.nodes[i]->op() == OpKind::Cat) && stream[i] == -2 &&
                        users[i] >= 2;
    if (depth[i] >= kMaxFusedDepth || merges) {
      cuts[i] = true;
      depth[i] = 0;  // read back from memory by its users
      stream[i] = static_cast<int>(i);
    }
  }
  return cuts;
}

}  // namespace lazyjit::lowering

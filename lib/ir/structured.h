// Shape and dtype rules of the ops that are not elementwise: reductions, views, matmul and
// random leaves. One rule per op, used by the builder (on user input, after the API has
// normalised negative dims and the like) and by the verifier (on parsed or built graphs).
#pragma once

#include <span>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "ir/node.h"

namespace lazyjit::ir {

/// The result dtype and shape of `op` over `operands` with `attrs`, or an error naming the
/// op and the offending values. Reshape, Expand and Slice take the result shape from
/// `given` (their attrs do not determine it) and check it.
absl::StatusOr<std::pair<DType, Shape>> structured_result(OpKind op, std::span<const NodePtr> operands,
                                                           const Node::Attrs& attrs, const Shape* given);

/// Whether reshaping `from` to `to` only inserts or removes dims of size 1: their other
/// sizes are one sequence.
bool unit_dims_only(const Shape& from, const Shape& to);

/// How reshaping `from` to `to` groups their dims: the finest split of both into runs that
/// hold the same elements (dims of size 1 aside: their index is 0 on either side). One entry
/// per dim of `to` other than 1: the number of `from`'s dims other than 1 in the group that
/// ends there, else 0. [16,64,4,32] to [1024,128] is {2,2}, the reverse {0,1,0,1}, and [2,3]
/// to [2,1,3] is {1,1}. Empty where it says no more than the linear index: one group that is
/// not dim for dim ([6,4] to [4,6]), no dims but 1s, or no elements. make_structured puts it
/// in a reshape's attrs (so in the graph key), and a kernel maps its index group by group: a
/// group of one dim on each side costs no arithmetic, and a group divides by its own dims only.
Node::Attrs reshape_groups(const Shape& from, const Shape& to);

/// A reshape's groups (its attrs, from reshape_groups; not empty): f(end, from_dims) for each
/// in order, with `end` the result dim it ends at and `from_dims` the operand's dims other
/// than 1 in it, outermost first.
void for_each_reshape_group(const Node& reshape, absl::FunctionRef<void(int, std::span<const int>)> f);

/// A node of a non-elementwise op, checked by structured_result. Operands are not promoted:
/// callers convert them first (cat and matmul take one dtype).
absl::StatusOr<NodePtr> make_structured(OpKind op, Node::Operands operands, Node::Attrs attrs,
                                        const Shape* given = nullptr);

/// Index arithmetic in which an index map is written once: the interpreter runs it on
/// numbers, the lowering on kernel IR index expressions (a Value is then an expression's id,
/// and a size is read from the shape table).
class IndexArith {
 public:
  using Value = int64_t;
  virtual ~IndexArith() = default;
  virtual Value constant(int64_t c) = 0;
  virtual Value add(Value a, Value b) = 0;
  virtual Value sub(Value a, Value b) = 0;
  virtual Value mul(Value a, Value b) = 0;
  /// Dim `d` of the map's operand.
  virtual Value operand_size(int d) = 0;
};

/// The element of its operand that element `index` (one value per result dim) of `node`, an
/// index map, reads: one value per operand dim, into `operand`. False for the maps that are
/// not index arithmetic alone, which the interpreter and the lowering spell out themselves:
/// reshape (the same linear index), cat (one of several operands) and the maps that read
/// indices from data (index_select, gather, one_hot).
bool operand_index(const Node& node, IndexArith& arith, std::span<const IndexArith::Value> index,
                   std::vector<IndexArith::Value>& operand);

/// The attrs of Unfold and UnfoldTranspose: a window of kh x kw, strides, zero padding on
/// both sides, dilations, over `groups` groups of channels.
struct Window {
  int64_t groups, kh, kw, sh, sw, ph, pw, dh, dw;
  static Window of(const Node::Attrs& attrs) {
    return {attrs[0], attrs[1], attrs[2], attrs[3], attrs[4], attrs[5], attrs[6], attrs[7], attrs[8]};
  }
  /// The output extent along H (vertical) or W for an input extent `in`: negative when the
  /// dilated window is larger than the padded input.
  int64_t out_h(int64_t in) const { return out(in, kh, sh, ph, dh); }
  int64_t out_w(int64_t in) const { return out(in, kw, sw, pw, dw); }
  static int64_t out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
    const int64_t span = in + 2 * p - d * (k - 1) - 1;
    return span < 0 ? -1 : span / s + 1;
  }
};

/// The node whose buffer a matrix operand reads row by row through a sliding window: under
/// permutes, slices and reshapes, an unpadded unfold with stride 1 along W whose column dim
/// (ow) is the operand's last dim, and below it a node whose last dim that is. A reshape may
/// merge (oh, ow) of an unfold one column wide into one run (a convolution over the padded
/// width: conv2d), or merge the base's last dims. A row of the operand is then a
/// unit-stride run of that node's buffer. Null for any other operand.
/// Lowering reads such an operand in place (window_in_place); autograd orients a product's
/// gradient so that the window is such an operand.
const Node* window_rows_base(const Node& operand);

/// Whether `node` is a transpose: a permute of its last two dims, the others in place.
bool is_transpose(const Node& node);

/// The name a user knows `op` by: a scatter's public function (scatter_add, index_copy, ...).
std::string_view user_op_name(OpKind op, const Node::Attrs& attrs);
/// The error of an index out of range at run time (IndexSelect, Gather): found by the
/// interpreter and by the kernel status word alike.
std::string index_error(OpKind op, const Node::Attrs& attrs, int64_t index, int64_t size);
/// The error of an integer division by zero (floor_divide, remainder), likewise.
std::string division_error(OpKind op);

/// A Rand or Randn leaf: element i is a function of (seed, i) alone (scalar_semantics.h).
NodePtr make_random(OpKind op, int64_t seed, DType dtype, Shape shape);

}  // namespace lazyjit::ir

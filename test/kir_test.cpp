// The kernel IR: construction (shared and folded expressions, dead ones dropped), the
// verifier's diagnostics, and the text form.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lowering/kir.h"

namespace lazyjit::kir {
namespace {

using testing::HasSubstr;

/// out[i] = in[i] * 2 over [begin, end), a kernel of two f32 buffers.
Kernel doubling() {
  Builder k;
  const int in = k.new_buffer(DType::Float32), out = k.new_buffer(DType::Float32);
  k.loop(k.begin(), k.end(), [&](Id i) {
    k.store(out, i, k.op(ir::OpKind::Mul, DType::Float32, {k.load(in, i), k.float_constant(DType::Float32, 2.0)}));
  });
  k.kernel().kind = "element";
  k.kernel().count = k.dim(k.new_dim());
  k.kernel().work = k.index(1);
  return k.take();
}

TEST(KernelIrTest, ExpressionsAreSharedFoldedAndDeadOnesDropped) {
  Builder k;
  const Id d = k.dim(k.new_dim());
  EXPECT_EQ(k.add(d, k.index(0)), d);
  EXPECT_EQ(k.mul(k.index(1), d), d);
  EXPECT_EQ(k.mul(k.index(6), k.index(7)), k.index(42));
  EXPECT_EQ(k.ceil_div(k.index(10), k.index(4)), k.index(3));
  EXPECT_EQ(k.mul(d, d), k.mul(d, d));  // one expression
  const Id unused = k.rem(d, k.index(3));
  k.kernel().count = k.mul(d, d);
  k.kernel().work = d;
  const Kernel kernel = k.take();
  EXPECT_EQ(kernel.exprs.size(), 2u) << print(kernel) << "(the remainder %" << unused << " is dropped)";
  EXPECT_EQ(verify(kernel), "");
}

/// An index taken apart by a shape and put back together, (x / d) * d + x % d, is x (a
/// reshape read through another: tier 0 then sees an affine offset where it saw divisions).
TEST(KernelIrTest, AnIndexTakenApartAndPutBackTogetherIsTheIndex) {
  Builder k;
  const Id x = k.dim(k.new_dim()), d = k.dim(k.new_dim()), e = k.dim(k.new_dim());
  const Id q = k.div(x, d), r = k.rem(x, d);
  EXPECT_EQ(k.add(k.mul(q, d), r), x);
  EXPECT_EQ(k.add(r, k.mul(d, q)), x);  // either order
  // Two levels, as a reshape of a reshape builds them: ((x / d) / e * e + (x / d) % e) * d + x % d.
  EXPECT_EQ(k.add(k.mul(k.add(k.mul(k.div(q, e), e), k.rem(q, e)), d), r), x);
  // The last two terms of a sum, as an offset is summed: p + (x / d) * d + x % d is p + x.
  const Id p = k.dim(k.new_dim());
  EXPECT_EQ(k.add(k.add(p, k.mul(q, d)), r), k.add(p, x));
  EXPECT_EQ(k.add(r, k.add(k.mul(q, d), p)), k.add(p, x));
  // Not the same x or d: no change.
  EXPECT_NE(k.add(k.mul(q, d), k.rem(e, d)), e);
  EXPECT_NE(k.add(k.mul(k.div(x, e), d), r), x);
  EXPECT_NE(k.add(k.mul(q, e), k.rem(x, e)), x);
}

TEST(KernelIrTest, TheTextShowsTheFrameTheExpressionsAndTheLoops) {
  const Kernel kernel = doubling();
  EXPECT_EQ(verify(kernel), "");
  EXPECT_EQ(print(kernel),
            "kernel per element (b0: f32, b1: f32 out; dims 1; scalars 0)\n"
            "  %0 = end\n"
            "  %1 = begin\n"
            "  %2 = v0\n"
            "  %3 = load f32 b0[%2]\n"
            "  %4 = f32 2\n"
            "  %5 = mul f32 %3, %4\n"
            "  %6 = d0\n"
            "  %7 = 1\n"
            "  count %6 work %7\n"
            "  for v0 in [%1, %0):\n"
            "    store b1[%2] = %5\n");
}

TEST(KernelIrTest, TheVerifierNamesWhatIsWrong) {
  {
    Kernel bad = doubling();
    bad.buffers[1].dtype = DType::Float64;
    EXPECT_THAT(verify(bad), HasSubstr("a store of %5 to b1 of another dtype"));
  }
  {
    Kernel bad = doubling();
    bad.body[0].body.push_back(bad.body[0]);  // a loop inside itself reuses v0 ...
    bad.body.push_back(bad.body[0].body[0]);  // ... and a store after the loop reads it
    EXPECT_THAT(verify(bad), HasSubstr("reads v0 outside its loop"));
  }
  {
    Kernel bad = doubling();
    bad.exprs[3].operands[0] = 5;
    EXPECT_THAT(verify(bad), HasSubstr("%3 uses %5, which does not come before it"));
  }
  {
    Kernel bad = doubling();
    bad.buffers[1].written = false;
    EXPECT_THAT(verify(bad), HasSubstr("a store to b1, which is not an output"));
  }
  {
    Kernel bad = doubling();
    bad.exprs[2].kind = ExprKind::Dim;
    bad.exprs[2].slot = 3;
    EXPECT_THAT(verify(bad), HasSubstr("%2 = d3: no such dim"));
  }
}

// A check goes to the innermost loop whose variable it uses: an index read per row is
// checked once per row, before the row's loop; one that reads a local stays where it is.
TEST(KernelIrTest, AChecksPlaceIsTheInnermostLoopItDependsOn) {
  Builder k;
  const int index = k.new_buffer(DType::Int64), out = k.new_buffer(DType::Float32);
  const int status = k.new_buffer(DType::Int64);
  const int acc = k.new_local(DType::Int64);
  const Id n = k.dim(k.new_dim());
  k.loop(k.begin(), k.end(), [&](Id row) {
    k.loop(k.index(0), n, [&](Id col) {
      const Id i = k.load(index, row);
      EXPECT_EQ(k.check(k.op(ir::OpKind::Lt, DType::Bool, {i, n}), i, status), 1);
      k.assign(acc, k.add(i, col));
      const Id sum = k.local(acc);
      EXPECT_EQ(k.check(k.op(ir::OpKind::Lt, DType::Bool, {sum, n}), sum, status), 2);
      k.store(out, k.add(k.mul(row, n), col), k.convert(i, DType::Float32));
    });
  });
  k.kernel().kind = "row";
  k.kernel().count = n;
  k.kernel().work = n;
  const Kernel kernel = k.take();
  EXPECT_EQ(verify(kernel), "");
  const std::string text = print(kernel);
  const size_t outer = text.find("for v0"), first = text.find("check"), inner = text.find("for v1");
  const size_t assign = text.find("l0 = "), second = text.find("check", first + 1);
  ASSERT_NE(second, std::string::npos) << text;
  EXPECT_TRUE(outer < first && first < inner) << text;  // in v0's body, before v1
  EXPECT_TRUE(inner < assign && assign < second) << text;  // after the local it reads is set
  EXPECT_THAT(text, HasSubstr("else fail 2 with")) << text;
}

}  // namespace
}  // namespace lazyjit::kir

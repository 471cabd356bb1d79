// A hand-written lexer and recursive-descent parser for .ljir text.
#include "ir/parser.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <string>

#include "fmt/format.h"
#include "ir/builder.h"
#include "ir/dtype_dispatch.h"
#include "ir/host_buffer.h"
#include "ir/structured.h"
#include "ir/verifier.h"

namespace lazyjit::ir {
namespace {

/// Parameters read from text are host buffers; past this size a text graph is not the tool.
constexpr int64_t kMaxParameterBytes = int64_t{1} << 28;

struct Token {
  enum class Kind { Word, Value, Number, Punct, End } kind = Kind::End;
  std::string_view text;
  int line = 1, column = 1;
};

std::string describe(const Token& t) {
  return t.kind == Token::Kind::End ? std::string("end of input") : fmt::format("'{}'", t.text);
}

class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  Token next() {
    skip_space_and_comments();
    Token t{Token::Kind::End, {}, line_, column_};
    if (pos_ >= text_.size()) return t;
    const size_t start = pos_;
    const char c = text_[pos_];
    auto word_char = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.'; };
    if (c == '%') {
      advance();
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) advance();
      t.kind = Token::Kind::Value;
    } else if (std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+') {
      advance();
      while (pos_ < text_.size() && (word_char(text_[pos_]) ||
                                     ((text_[pos_] == '-' || text_[pos_] == '+') &&
                                      (text_[pos_ - 1] == 'e' || text_[pos_ - 1] == 'E')))) {
        advance();
      }
      t.kind = Token::Kind::Number;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (pos_ < text_.size() && word_char(text_[pos_])) advance();
      t.kind = Token::Kind::Word;
    } else {
      advance();
      t.kind = Token::Kind::Punct;
    }
    t.text = text_.substr(start, pos_ - start);
    return t;
  }

 private:
  void advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      column_ = 1;
    } else {
      ++column_;
    }
    ++pos_;
  }
  void skip_space_and_comments() {
    while (pos_ < text_.size()) {
      if (std::isspace(static_cast<unsigned char>(text_[pos_]))) {
        advance();
      } else if (text_.substr(pos_, 2) == "//") {
        while (pos_ < text_.size() && text_[pos_] != '\n') advance();
      } else {
        return;
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 1, column_ = 1;
};

/// The value of literal `t` as `dtype`: numbers (ints in range for integer dtypes), true,
/// false, 0 and 1 for bool, inf and nan for floats.
std::optional<ScalarValue> literal_value(const Token& t, DType dtype) {
  const std::string text(t.text);
  if (dtype == DType::Bool && t.kind == Token::Kind::Word && (text == "true" || text == "false")) {
    return ScalarValue::of_int(text == "true");
  }
  const bool special = t.kind == Token::Kind::Word && (text == "inf" || text == "nan");
  if (t.kind != Token::Kind::Number && !(special && is_floating(dtype))) return std::nullopt;
  if (is_floating(dtype)) {
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) return std::nullopt;
    return ScalarValue::of_double(v);
  }
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  const bool fits = dtype == DType::Int64 || (dtype == DType::Int32 && v >= INT32_MIN && v <= INT32_MAX) ||
                    (dtype == DType::Bool && (v == 0 || v == 1));
  if (ec != std::errc() || ptr != text.data() + text.size() || !fits) return std::nullopt;
  return ScalarValue::of_int(v);
}

class Parser {
 public:
  explicit Parser(std::string_view text) : lexer_(text) { token_ = lexer_.next(); }

  absl::StatusOr<ParsedGraph> parse() {
    if (auto s = expect_word("graph", "'graph'"); !s.ok()) return s;
    if (auto s = expect_punct('{', "'{' after 'graph'"); !s.ok()) return s;
    while (!(token_.kind == Token::Kind::Word && token_.text == "return")) {
      if (auto s = statement(); !s.ok()) return s;
    }
    take();
    do {
      absl::StatusOr<NodePtr> root = operand("a value to return");
      if (!root.ok()) return root.status();
      graph_.roots.push_back(*std::move(root));
    } while (accept_punct(','));
    if (auto s = expect_punct('}', "',' or '}' after the returned values"); !s.ok()) return s;
    if (token_.kind != Token::Kind::End) return error("expected end of input after '}'");
    return std::move(graph_);
  }

 private:
  Token take() {
    Token t = token_;
    token_ = lexer_.next();
    return t;
  }
  absl::Status error(std::string_view what) const { return error_at(token_, what); }
  absl::Status error_at(const Token& at, std::string_view what) const {
    return absl::InvalidArgumentError(fmt::format("line {}, column {}: {}", at.line, at.column, what));
  }
  absl::Status expected(std::string_view what) const {
    return error(fmt::format("expected {}, got {}", what, describe(token_)));
  }
  bool accept_punct(char c) {
    if (token_.kind != Token::Kind::Punct || token_.text[0] != c) return false;
    take();
    return true;
  }
  absl::Status expect_punct(char c, std::string_view what) {
    return accept_punct(c) ? absl::OkStatus() : expected(what);
  }
  absl::Status expect_word(std::string_view word, std::string_view what) {
    if (token_.kind != Token::Kind::Word || token_.text != word) return expected(what);
    take();
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> integer(std::string_view what) {
    if (token_.kind != Token::Kind::Number) return expected(what);
    int64_t v = 0;
    const char* end = token_.text.data() + token_.text.size();
    auto [ptr, ec] = std::from_chars(token_.text.data(), end, v);
    if (ec != std::errc() || ptr != end) return expected(what);
    take();
    return v;
  }

  absl::StatusOr<NodePtr> operand(std::string_view what) {
    if (token_.kind != Token::Kind::Value) return expected(what);
    int64_t id = -1;
    const char* end = token_.text.data() + token_.text.size();
    auto [ptr, ec] = std::from_chars(token_.text.data() + 1, end, id);
    if (ec != std::errc() || ptr != end || id < 0 || id >= static_cast<int64_t>(values_.size())) {
      return error(fmt::format("{} is not a value defined above", token_.text));
    }
    take();
    return values_[id];
  }

  absl::StatusOr<std::pair<DType, Shape>> type() {
    if (token_.kind != Token::Kind::Word) return expected("a dtype such as float32");
    std::optional<DType> dtype;
    for (DType d : {DType::Bool, DType::Int32, DType::Int64, DType::Float32, DType::Float64}) {
      if (dtype_name(d) == token_.text) dtype = d;
    }
    if (!dtype) return expected("a dtype (bool, int32, int64, float32, float64)");
    take();
    if (auto s = expect_punct('[', "'[' after the dtype"); !s.ok()) return s;
    Shape shape;
    const Token start = token_;
    if (!accept_punct(']')) {
      do {
        const Token dim_token = token_;
        absl::StatusOr<int64_t> dim = integer("a dim size");
        if (!dim.ok()) return dim.status();
        if (*dim < 0) return error_at(dim_token, fmt::format("dims must not be negative, got {}", *dim));
        shape.push_back(*dim);
        if (shape.size() > kMaxRank) return error_at(start, fmt::format("rank past the maximum of {}", kMaxRank));
      } while (accept_punct(','));
      if (auto s = expect_punct(']', "',' or ']' in the shape"); !s.ok()) return s;
    }
    if (absl::Status s = validate_dims("type", shape); !s.ok()) return error_at(start, std::string(s.message()));
    return std::make_pair(*dtype, std::move(shape));
  }

  /// One literal of `dtype` (see literal_value).
  absl::StatusOr<ScalarValue> literal(DType dtype) {
    std::optional<ScalarValue> v = literal_value(token_, dtype);
    if (!v) return expected(fmt::format("a {} literal", dtype_name(dtype)));
    take();
    return *v;
  }

  absl::Status statement() {
    const Token id = token_;
    if (token_.kind != Token::Kind::Value) return expected(fmt::format("%{} or 'return'", values_.size()));
    if (id.text != fmt::format("%{}", values_.size())) {
      return error(fmt::format("expected %{} (values are numbered in order), got {}", values_.size(), id.text));
    }
    take();
    if (auto s = expect_punct('=', "'=' after the value name"); !s.ok()) return s;
    const Token op_token = token_;
    std::optional<OpKind> op = token_.kind == Token::Kind::Word ? op_from_name(token_.text) : std::nullopt;
    if (!op) return expected("an op name");
    take();
    absl::StatusOr<NodePtr> node = node_of(*op, op_token);
    if (!node.ok()) return node.status();
    values_.push_back(*std::move(node));
    return absl::OkStatus();
  }

  absl::StatusOr<NodePtr> node_of(OpKind op, const Token& op_token) {
    switch (op) {
      case OpKind::Parameter: return parameter();
      case OpKind::Scalar: case OpKind::Constant: return scalar(op);
      case OpKind::Rand: case OpKind::Randn: return random(op, op_token);
      default: return computed(op, op_token);
    }
  }

  /// "rand SEED : TYPE".
  absl::StatusOr<NodePtr> random(OpKind op, const Token& op_token) {
    absl::StatusOr<int64_t> seed = integer("the seed");
    if (!seed.ok()) return seed.status();
    if (auto s = expect_punct(':', "':' before the type"); !s.ok()) return s;
    auto t = type();
    if (!t.ok()) return t.status();
    auto [dtype, shape] = *std::move(t);
    NodePtr node = make_random(op, *seed, dtype, std::move(shape));
    if (absl::Status s = verify_node(*node); !s.ok()) {
      return error_at(op_token, fmt::format("{}: {}", op_name(op), std::string(s.message())));
    }
    return node;
  }

  /// "[a,b,...]" right after the op name: the node's attrs, if any.
  absl::StatusOr<Node::Attrs> attrs() {
    Node::Attrs attrs;
    if (!accept_punct('[')) return attrs;
    if (accept_punct(']')) return attrs;
    do {
      absl::StatusOr<int64_t> v = integer("an attribute (an integer)");
      if (!v.ok()) return v.status();
      attrs.push_back(*v);
      if (attrs.size() > kMaxRank + 1) return error("too many attributes");
    } while (accept_punct(','));
    if (auto s = expect_punct(']', "',' or ']' after an attribute"); !s.ok()) return s;
    return attrs;
  }

  absl::StatusOr<NodePtr> parameter() {
    const Token slot_token = token_;
    absl::StatusOr<int64_t> slot = integer("a parameter slot");
    if (!slot.ok()) return slot.status();
    const int64_t next = static_cast<int64_t>(graph_.parameters.size());
    if (*slot > next || *slot < 0) {
      return error_at(slot_token, fmt::format("expected parameter slot {} or less (slots are numbered in order)", next));
    }
    if (auto s = expect_punct(':', "':' before the type"); !s.ok()) return s;
    const Token type_token = token_;
    auto t = type();
    if (!t.ok()) return t.status();
    auto [dtype, shape] = *std::move(t);
    if (*slot < next) {  // a second leaf over an earlier buffer
      const NodePtr& earlier = graph_.parameters[*slot];
      if (earlier->dtype() != dtype || earlier->shape() != shape) {
        return error_at(type_token, fmt::format("parameter {} was declared {}{} above", *slot,
                                                dtype_name(earlier->dtype()), shape_to_string(earlier->shape())));
      }
      return make_parameter(earlier->data());
    }
    if (numel(shape) * dtype_size(dtype) > kMaxParameterBytes) {
      return error_at(type_token, "parameter too large for a text graph (256 MiB at most)");
    }
    auto buffer = std::make_shared<HostBuffer>(dtype, std::vector<int64_t>(shape.begin(), shape.end()));
    const bool given = accept_punct('=');
    if (given) {
      if (auto s = values(*buffer); !s.ok()) return s;
    }
    NodePtr node = make_parameter(std::move(buffer));
    graph_.parameters.push_back(node);
    graph_.given.push_back(given);
    return node;
  }

  /// "[v0, v1, ...]" filling `buffer` in row-major order.
  absl::Status values(BackendData& buffer) {
    const Token start = token_;
    if (auto s = expect_punct('[', "'[' before the values"); !s.ok()) return s;
    const int64_t n = buffer.numel();
    int64_t count = 0;
    if (!accept_punct(']')) {
      do {
        absl::StatusOr<ScalarValue> v = literal(buffer.dtype());
        if (!v.ok()) return v.status();
        if (count == n) return error_at(start, fmt::format("more than the {} values of the shape", n));
        dispatch_dtype(buffer.dtype(), [&]<class T>(T) {
          using S = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
          static_cast<S*>(buffer.data())[count] =
              static_cast<S>(is_floating(buffer.dtype()) ? static_cast<T>(v->f) : static_cast<T>(v->i));
        });
        ++count;
      } while (accept_punct(','));
      if (auto s = expect_punct(']', "',' or ']' in the values"); !s.ok()) return s;
    }
    if (count != n) return error_at(start, fmt::format("{} values for a shape of {} elements", count, n));
    return absl::OkStatus();
  }

  /// "scalar VALUE : TYPE" or "constant VALUE : TYPE": the value is read once the type says how.
  absl::StatusOr<NodePtr> scalar(OpKind op) {
    const Token value = token_;
    if (value.kind != Token::Kind::Number && value.kind != Token::Kind::Word) return expected("the scalar's value");
    take();
    if (auto s = expect_punct(':', "':' before the type"); !s.ok()) return s;
    auto t = type();
    if (!t.ok()) return t.status();
    auto [dtype, shape] = *std::move(t);
    std::optional<ScalarValue> v = literal_value(value, dtype);
    if (!v) return error_at(value, fmt::format("expected a {} literal, got {}", dtype_name(dtype), describe(value)));
    return op == OpKind::Constant ? make_constant(*v, dtype, std::move(shape)) : make_scalar(*v, dtype, std::move(shape));
  }

  absl::StatusOr<NodePtr> computed(OpKind op, const Token& op_token) {
    absl::StatusOr<Node::Attrs> node_attrs = attrs();
    if (!node_attrs.ok()) return node_attrs.status();
    Node::Operands operands;
    if (op_info(op).arity != 0) {
      do {
        absl::StatusOr<NodePtr> v = operand("an operand such as %0");
        if (!v.ok()) return v.status();
        operands.push_back(*std::move(v));
      } while (accept_punct(','));
    }
    if (auto s = expect_punct(':', operands.empty() ? "':' before the type" : "',' or ':' after an operand");
        !s.ok()) {
      return s;
    }
    auto t = type();
    if (!t.ok()) return t.status();
    auto [dtype, shape] = *std::move(t);
    if (op == OpKind::Arange && (shape.size() != 1 || dtype == DType::Bool)) {
      return error_at(op_token, "arange: expected a 1-D integer or float type");
    }
    auto node = std::make_shared<Node>(op, dtype, std::move(shape), std::move(operands), *std::move(node_attrs));
    if (absl::Status s = verify_node(*node); !s.ok()) {
      return error_at(op_token, fmt::format("{}: {}", op_name(op), std::string(s.message())));
    }
    if (op == OpKind::Reshape && node->attrs().empty()) {  // the attrs a traced reshape gets: its groups
      return make_structured(op, Node::Operands(node->operands().begin(), node->operands().end()), {}, &node->shape());
    }
    return NodePtr(std::move(node));
  }

  Lexer lexer_;
  Token token_;
  std::vector<NodePtr> values_;
  ParsedGraph graph_;
};

}  // namespace

absl::StatusOr<ParsedGraph> parse_graph(std::string_view text) { return Parser(text).parse(); }

}  // namespace lazyjit::ir

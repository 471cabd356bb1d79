// Loading and strict parsing of the digits CSV (see digits_data.h).
#include "digits_data.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>

#include <zlib.h>

namespace {

constexpr int64_t kFields = DigitsData::kPixels + 1;  // the pixels, then the label
constexpr int64_t kMaxInk = 16;

using GzFile = std::unique_ptr<gzFile_s, decltype(&gzclose)>;

std::string read_gzip(const std::string& path) {
  errno = 0;
  GzFile file(gzopen(path.c_str(), "rb"), &gzclose);
  if (!file) {
    int err = errno;
    throw DigitsError(path + ": " + (err != 0 ? std::strerror(err) : "cannot open"), err == ENOENT);
  }
  std::string text;
  char chunk[1 << 16];
  int n = 0;
  while ((n = gzread(file.get(), chunk, sizeof(chunk))) > 0) text.append(chunk, static_cast<size_t>(n));
  // A truncated stream ends with n == 0 and Z_BUF_ERROR ("unexpected end of file"), not n < 0.
  int code = Z_OK;
  const char* message = gzerror(file.get(), &code);
  if (n < 0 || code != Z_OK) throw DigitsError(message, false);  // zlib's message starts with the path
  return text;
}

/// A field as it appears in a message: quoted, cut short if long.
std::string quoted(std::string_view field) {
  constexpr size_t kShown = 20;
  return field.size() <= kShown ? "'" + std::string(field) + "'" : "'" + std::string(field.substr(0, kShown)) + "...'";
}

std::vector<std::string_view> split(std::string_view line, char separator) {
  std::vector<std::string_view> fields;
  for (size_t start = 0;;) {
    size_t end = line.find(separator, start);
    fields.push_back(line.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return fields;
    start = end + 1;
  }
}

/// Appends one CSV line's pixels and label to `out`; throws DigitsError for anything else.
/// `where` ("path:line") is only called to build a message.
template <class Where>
void parse_line(std::string_view line, const Where& where, DigitsData& out) {
  if (line.empty()) throw DigitsError(where() + ": empty line", false);
  std::vector<std::string_view> fields = split(line, ',');
  if (static_cast<int64_t>(fields.size()) != kFields) {
    throw DigitsError(where() + ": " + std::to_string(fields.size()) + " fields, expected " + std::to_string(kFields) +
                          " (64 pixels and a label)",
                      false);
  }
  for (int64_t i = 0; i < kFields; ++i) {
    std::string_view field = fields[i];
    bool is_label = i == kFields - 1;
    auto what = [&] { return where() + ": field " + std::to_string(i + 1) + (is_label ? " (label)" : " (pixel)"); };
    uint64_t value = 0;  // unsigned: from_chars then takes digits only, no sign
    auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
    if (field.empty() || ec != std::errc() || end != field.data() + field.size()) {
      throw DigitsError(what() + " is " + quoted(field) + ", not an integer", false);
    }
    int64_t max = is_label ? DigitsData::kClasses - 1 : kMaxInk;
    if (value > static_cast<uint64_t>(max)) {
      throw DigitsError(what() + " is " + std::to_string(value) + ", expected 0.." + std::to_string(max), false);
    }
    if (is_label) {
      out.labels.push_back(static_cast<int64_t>(value));
    } else {
      out.pixels.push_back(static_cast<float>(value) / static_cast<float>(kMaxInk));
    }
  }
}

}  // namespace

DigitsData parse_digits_csv(std::string_view text, const std::string& source) {
  DigitsData data;
  int64_t line_number = 0;
  while (!text.empty()) {
    size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    if (line.ends_with('\r')) line.remove_suffix(1);  // CRLF line ends are not a data error
    ++line_number;
    parse_line(line, [&] { return source + ":" + std::to_string(line_number); }, data);
  }
  if (data.rows() == 0) throw DigitsError(source + ": no rows", false);
  return data;
}

DigitsData load_digits(const std::string& path) { return parse_digits_csv(read_gzip(path), path); }

// The sklearn handwritten digits data set (1797 images of 8x8 pixels, classes 0-9), read from
// the gzipped CSV that Debian's python3-sklearn ships.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

/// Where python3-sklearn installs the data set.
inline constexpr const char* kDefaultDigitsPath = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";

struct DigitsData {
  static constexpr int64_t kPixels = 64;
  static constexpr int64_t kClasses = 10;
  /// Row-major [rows, kPixels]: the file's ink counts 0..16 scaled by 1/16 into [0, 1].
  std::vector<float> pixels;
  /// [rows], each in [0, kClasses).
  std::vector<int64_t> labels;

  int64_t rows() const { return static_cast<int64_t>(labels.size()); }
};

/// Why the data could not be loaded. `missing()` tells a file that is not there (the user must
/// install or point to it) from one that is unreadable or malformed.
class DigitsError : public std::runtime_error {
 public:
  DigitsError(const std::string& message, bool missing) : std::runtime_error(message), missing_(missing) {}
  bool missing() const { return missing_; }

 private:
  bool missing_;
};

/// Reads `path` (gzip, or plain text: zlib passes uncompressed files through) and parses it
/// with parse_digits_csv. Throws DigitsError.
DigitsData load_digits(const std::string& path);

/// Parses the CSV text strictly: every line is 64 integer pixels in [0, 16] then an integer
/// label in [0, 9], comma-separated, no blanks. Throws DigitsError naming `source`, the line
/// number and what was wrong ("digits.csv.gz:12: field 65 (label) is 11, expected 0..9").
DigitsData parse_digits_csv(std::string_view text, const std::string& source);

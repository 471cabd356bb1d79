// Writing dump files.
#include "runtime/dump_dir.h"

#include <filesystem>
#include <fstream>

#include "runtime/logging.h"

namespace lazyjit::runtime {

void DumpDir::write(std::string_view stem, std::string_view extension, std::string_view text) const {
  std::error_code error;
  std::filesystem::create_directories(path_, error);
  const std::filesystem::path file = std::filesystem::path(path_) / (std::string(stem) + std::string(extension));
  std::ofstream out(file, std::ios::binary);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) LAZYJIT_LOG(warn, "cannot write dump file {}", file.string());
}

}  // namespace lazyjit::runtime

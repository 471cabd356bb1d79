// Logger creation from the environment.
#include "runtime/logging.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>
#include <utility>

#include "spdlog/sinks/stdout_color_sinks.h"

namespace lazyjit::runtime {

std::optional<spdlog::level::level_enum> parse_log_level(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  static constexpr std::pair<std::string_view, spdlog::level::level_enum> kNames[] = {
      {"trace", spdlog::level::trace}, {"debug", spdlog::level::debug},       {"info", spdlog::level::info},
      {"warn", spdlog::level::warn},   {"warning", spdlog::level::warn},      {"error", spdlog::level::err},
      {"err", spdlog::level::err},     {"critical", spdlog::level::critical}, {"off", spdlog::level::off}};
  for (const auto& [name, level] : kNames) {
    if (lower == name) return level;
  }
  return std::nullopt;
}

spdlog::logger& logger() {
  static spdlog::logger* instance = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto* log = new spdlog::logger("lazyjit", std::move(sink));  // leaked: lives to process exit
    log->set_pattern("[lazyjit %l] %v");
    // Problems (a damaged cache file, an unwritable dump directory) are reported unless
    // LAZYJIT_LOG_LEVEL=off; everything chattier is off unless asked for.
    log->set_level(spdlog::level::warn);
    const char* text = std::getenv("LAZYJIT_LOG_LEVEL");
    if (text != nullptr && *text != '\0') {
      if (std::optional<spdlog::level::level_enum> level = parse_log_level(text)) {
        log->set_level(*level);
      } else {
        log->warn("LAZYJIT_LOG_LEVEL={} is not one of trace, debug, info, warn, error, off; using warn", text);
      }
    }
    return log;
  }();
  return *instance;
}

}  // namespace lazyjit::runtime

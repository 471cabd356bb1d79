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

namespace {

/// What LAZYJIT_LOG_LEVEL asks for: a level, or a text that names none (warn is used).
struct Requested {
  spdlog::level::level_enum level = spdlog::level::warn;
  std::string unknown;  // a value that names no level
};

const Requested& requested() {
  static const Requested r = [] {
    Requested out;
    const char* text = std::getenv("LAZYJIT_LOG_LEVEL");
    if (text == nullptr || *text == '\0') return out;
    if (std::optional<spdlog::level::level_enum> level = parse_log_level(text)) {
      out.level = *level;
    } else {
      out.unknown = text;
    }
    return out;
  }();
  return r;
}

}  // namespace

spdlog::level::level_enum log_level() {
  // An unknown value is reported once, by the logger it makes.
  if (!requested().unknown.empty()) (void)logger();
  return requested().level;
}

spdlog::logger& logger() {
  static spdlog::logger* instance = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto* log = new spdlog::logger("lazyjit", std::move(sink));  // leaked: lives to process exit
    log->set_pattern("[lazyjit %l] %v");
    // Problems (a damaged cache file, an unwritable dump directory) are reported unless
    // LAZYJIT_LOG_LEVEL=off; everything chattier is off unless asked for.
    log->set_level(requested().level);
    if (!requested().unknown.empty()) {
      log->warn("LAZYJIT_LOG_LEVEL={} is not one of trace, debug, info, warn, error, off; using warn",
                requested().unknown);
    }
    return log;
  }();
  return *instance;
}

}  // namespace lazyjit::runtime

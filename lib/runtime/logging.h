// The lazyjit logger: spdlog, level from LAZYJIT_LOG_LEVEL (trace|debug|info|warn|error|off, any case).
#pragma once

#include <optional>
#include <string_view>

#include "spdlog/spdlog.h"

namespace lazyjit::runtime {

/// The process's lazyjit logger: warnings only, unless LAZYJIT_LOG_LEVEL says otherwise. Use
/// the LAZYJIT_LOG macro: it tests the level before formatting anything, and makes the logger
/// (its stderr sink) only for a message that will be printed.
spdlog::logger& logger();

/// The level LAZYJIT_LOG_LEVEL names (warn when unset), read once; no logger made.
spdlog::level::level_enum log_level();
/// Whether a message at `level` is printed.
inline bool should_log(spdlog::level::level_enum level) { return level >= log_level(); }

/// The level a LAZYJIT_LOG_LEVEL value names, in any case ("WARN", "warning" and "err" too);
/// nullopt for an unknown one.
std::optional<spdlog::level::level_enum> parse_log_level(std::string_view text);

#define LAZYJIT_LOG(lvl, ...)                                                  \
  do {                                                                         \
    if (::lazyjit::runtime::should_log(spdlog::level::lvl)) {                  \
      ::lazyjit::runtime::logger().log(spdlog::level::lvl, __VA_ARGS__);       \
    }                                                                          \
  } while (false)

}  // namespace lazyjit::runtime

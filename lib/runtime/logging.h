// The lazyjit logger: spdlog, level from LAZYJIT_LOG_LEVEL (trace|debug|info|warn|error|off).
#pragma once

#include "spdlog/spdlog.h"

namespace lazyjit::runtime {

/// The process's lazyjit logger: warnings only, unless LAZYJIT_LOG_LEVEL says otherwise. Use
/// the LAZYJIT_LOG macro: it tests the level before formatting anything.
spdlog::logger& logger();

#define LAZYJIT_LOG(lvl, ...)                                             \
  do {                                                                    \
    auto& lazyjit_logger_ = ::lazyjit::runtime::logger();                 \
    if (lazyjit_logger_.should_log(spdlog::level::lvl)) {                 \
      lazyjit_logger_.log(spdlog::level::lvl, __VA_ARGS__);               \
    }                                                                     \
  } while (false)

}  // namespace lazyjit::runtime

// Logger creation from the environment.
#include "runtime/logging.h"

#include <cstdlib>

#include "spdlog/sinks/stdout_color_sinks.h"

namespace lazyjit::runtime {

spdlog::logger& logger() {
  static spdlog::logger* instance = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto* log = new spdlog::logger("lazyjit", std::move(sink));  // leaked: lives to process exit
    log->set_pattern("[lazyjit %l] %v");
    const char* level = std::getenv("LAZYJIT_LOG_LEVEL");
    // Problems (a damaged cache file, an unwritable dump directory) are reported unless
    // LAZYJIT_LOG_LEVEL=off; everything chattier is off unless asked for.
    log->set_level(level ? spdlog::level::from_str(level) : spdlog::level::warn);
    return log;
  }();
  return *instance;
}

}  // namespace lazyjit::runtime

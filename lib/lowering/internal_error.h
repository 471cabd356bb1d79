// A broken invariant of lowering: a bug of lazyjit, never a user's mistake.
#pragma once

#include <string>

#include "lazyjit/error.h"

namespace lazyjit::lowering {

/// Fails the compile of the graph being lowered with a lazyjit::Error naming `what`, instead
/// of aborting the user's process: the compile path passes it to the caller of sync/mark_step.
[[noreturn]] inline void internal_error(const std::string& what) {
  throw Error("lazyjit internal error in lowering (please report it): " + what);
}

}  // namespace lazyjit::lowering

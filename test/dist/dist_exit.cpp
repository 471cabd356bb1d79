// A job whose rank 1 leaves without a word, for test/dist/rank_exit.sh: with `exit` rank 1
// exits at once (the launcher notices and ends the job); with `hang` it stays alive but never
// joins the collective (LAZYJIT_DIST_TIMEOUT ends rank 0's wait with an Error). Rank 0 sums a
// tensor with the others; it must not wait forever.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <thread>

#include "lazyjit/dist.h"
#include "lazyjit/lazyjit.h"

int main(int argc, char** argv) {
  const std::string_view mode = argc > 1 ? argv[1] : "exit";
  try {
    lazyjit::dist::init();
    if (lazyjit::dist::rank() == 1) {
      if (mode == "exit") std::_Exit(3);
      std::this_thread::sleep_for(std::chrono::seconds(120));
      return 0;
    }
    // Four collectives under way at once: the job fails after one timeout, not four.
    lazyjit::Tensor total = lazyjit::zeros({4});
    for (int i = 0; i < 4; ++i) total = total + lazyjit::dist::all_reduce(lazyjit::full({4}, i));
    const float sum = lazyjit::sum(total).item<float>();
    std::printf("rank 0: sum %g\n", sum);
    return 0;
  } catch (const lazyjit::Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", lazyjit::dist::rank(), e.what());
    std::fflush(stderr);
    std::_Exit(1);  // MPI cannot be finalised with a collective outstanding
  }
}

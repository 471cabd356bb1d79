// lazyjit::dist over MPI: joining the job, and MPI as the carrier of the graph's collective
// ops (ir/collectives.h). One communication thread makes every MPI call, in the order the
// graphs start their collectives (every rank starts the same ones in the same order), while
// the graph's kernels run on. Its calls block (MPI's tuned algorithms, progressed inside the
// call); whoever waits for one waits until a deadline, so a rank that died makes the others
// fail with an Error instead of hanging (the communication thread is then abandoned).
// The C API only: Open MPI's deprecated C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <array>
#include <span>
#include <tuple>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fmt/format.h"
#include "ir/collectives.h"
#include "lazyjit/dist.h"
#include "lazyjit/error.h"

namespace lazyjit::dist {
namespace {

void check_mpi(int code, std::string_view what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(fmt::format("{}: MPI failed: {}", what, std::string_view(text, static_cast<size_t>(length))));
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::Bool: return MPI_UINT8_T;  // one byte, 0 or 1
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(int64_t op) {
  switch (static_cast<ir::ReduceOp>(op)) {
    case ir::ReduceOp::Sum: return MPI_SUM;
    case ir::ReduceOp::Max: return MPI_MAX;
    case ir::ReduceOp::Min: return MPI_MIN;
  }
  return MPI_SUM;
}

/// What every rank must agree on before a collective moves data: the op, its attrs, the
/// operand's dtype and shape (its first kMaxDims dims, and its element count). A run's list
/// of them is compared as one digest, and gathered whole only when the digests differ.
struct Signature {
  static constexpr int kMaxDims = 8;
  std::array<int64_t, 6 + kMaxDims> values{};

  /// A collective node's: its operand is the node's only operand.
  static Signature of(const ir::Node& node) {
    Signature s;
    const ir::Shape& operand = node.operand(0).shape();
    s.values[0] = static_cast<int64_t>(node.op());
    for (size_t i = 0; i < node.attrs().size() && i < 2; ++i) s.values[1 + i] = node.attrs()[i];
    s.values[3] = static_cast<int64_t>(node.dtype());
    s.values[4] = static_cast<int64_t>(operand.size());
    s.values[5] = ir::numel(operand);
    for (size_t d = 0; d < operand.size() && d < kMaxDims; ++d) s.values[6 + d] = operand[d];
    return s;
  }
  /// Rank r's collective, or "nothing" where r runs fewer.
  static std::string text_of(const std::vector<Signature>& list, size_t i, bool with_op) {
    if (i >= list.size()) return "nothing";
    return with_op ? list[i].op_text() + " of " + list[i].operand_text() : list[i].operand_text();
  }
  bool same_op(const Signature& o) const { return std::equal(values.begin(), values.begin() + 3, o.values.begin()); }
  std::string operand_text() const {
    std::vector<int64_t> dims(values.begin() + 6, values.begin() + 6 + std::min<int64_t>(values[4], kMaxDims));
    return fmt::format("{}[{}]", dtype_name(static_cast<DType>(values[3])), fmt::join(dims, ", "));
  }
  /// The op with its attrs, as the text form writes it: broadcast[1].
  std::string op_text() const {
    const auto op = static_cast<ir::OpKind>(values[0]);
    const int attrs = op == ir::OpKind::ReduceScatter ? 2 : 1;
    return fmt::format("{}[{}]", ir::op_name(op), fmt::join(values.begin() + 1, values.begin() + 1 + attrs, ","));
  }
  friend bool operator==(const Signature&, const Signature&) = default;
};

/// Runs jobs one after another, in the order they were posted, on a thread of its own. Once
/// abandoned (a job is stuck in MPI for good), the jobs after it are dropped unrun: their
/// futures report a broken promise.
class CommThread {
 public:
  CommThread() : thread_([this] { loop(); }) {}
  ~CommThread() {  // never reached once abandoned: the backend that owns it is leaked then
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    ready_.notify_one();
    thread_.join();
  }

  void abandon() { abandoned_ = true; }
  bool abandoned() const { return abandoned_; }

  /// The job's result (or exception), once it has run after every job posted before it.
  std::future<double> post(std::function<double()> job) {
    std::packaged_task<double()> task(std::move(job));
    std::future<double> result = task.get_future();
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back(std::move(task));
    }
    ready_.notify_one();
    return result;
  }

 private:
  void loop() {
    for (;;) {
      std::packaged_task<double()> job;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      if (!abandoned_) job();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::packaged_task<double()>> jobs_;
  bool stop_ = false;
  std::atomic<bool> abandoned_ = false;
  std::thread thread_;  // last: it starts once the rest is built
};

class MpiCollectives;

/// A collective posted to the communication thread.
class MpiRequest final : public ir::CollectiveRequest {
 public:
  MpiRequest(std::future<double> done, std::shared_ptr<MpiCollectives> backend, std::string_view name)
      : done_(std::move(done)), backend_(std::move(backend)), name_(name) {}
  double wait() override;
  bool still_using_buffers() const override { return timed_out_; }

 private:
  std::future<double> done_;
  std::shared_ptr<MpiCollectives> backend_;
  std::string_view name_;  // an op table name: static
  bool timed_out_ = false;
};

class MpiCollectives final : public ir::Collectives, public std::enable_shared_from_this<MpiCollectives> {
 public:
  MpiCollectives(MPI_Comm comm, double timeout) : comm_(comm), timeout_(timeout) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }

  void run(const ir::CollectiveCall& call) override { start(call)->wait(); }

  void agree(std::span<const ir::Node* const> collectives) override {
    std::vector<Signature> mine;
    for (const ir::Node* node : collectives) mine.push_back(Signature::of(*node));
    const std::string_view name = collectives.empty() ? "collectives" : ir::op_name(collectives.front()->op());
    if (abandoned()) throw Error(fmt::format("{}: an earlier collective timed out; this job cannot go on", name));
    // The list goes with the job: a job stuck past its deadline outlives this call.
    std::future<double> done = comm_thread_.post([this, mine = std::move(mine)] {
      compare(mine);
      return 0.0;
    });
    if (!wait_for(done)) throw timed_out(name);
    done.get();
  }

  std::unique_ptr<ir::CollectiveRequest> start(const ir::CollectiveCall& call) override {
    const std::string_view name = ir::op_name(call.node->op());
    if (abandoned()) throw Error(fmt::format("{}: an earlier collective timed out; this job cannot go on", name));
    const auto posted = std::chrono::steady_clock::now();
    return std::make_unique<MpiRequest>(comm_thread_.post([this, call, posted] {
      carry_out(call);
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - posted).count();
    }), shared_from_this(), name);
  }

  void barrier() {
    std::future<double> done = comm_thread_.post([this] {
      check_mpi(MPI_Barrier(comm_), "barrier");
      return 0.0;
    });
    if (!wait_for(done)) throw timed_out("barrier");
    done.get();
  }

  /// Waits for `done` until the deadline. False when it passed: the communication thread is
  /// then abandoned (its call will not return: another rank is gone), and so is this backend,
  /// which that thread still uses: it is leaked, never destroyed.
  bool wait_for(std::future<double>& done) {
    if (abandoned()) return done.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    if (done.wait_for(std::chrono::duration<double>(timeout_)) == std::future_status::ready) return true;
    if (!comm_thread_.abandoned()) {
      comm_thread_.abandon();
      new std::shared_ptr<MpiCollectives>(shared_from_this());  // leaked on purpose
    }
    return false;
  }

  Error timed_out(std::string_view name) const {
    return Error(fmt::format("{}: the other ranks did not answer within {} s (LAZYJIT_DIST_TIMEOUT): a rank may have "
                             "exited; this job cannot go on",
                             name, timeout_));
  }

  bool abandoned() const { return comm_thread_.abandoned(); }
  double timeout() const { return timeout_; }
  MPI_Comm comm() const { return comm_; }

 private:
  /// On the communication thread: the collective, from the signature check to its result.
  void carry_out(const ir::CollectiveCall& call) {
    const ir::Node& node = *call.node;
    const std::string_view name = ir::op_name(node.op());
    check_world(call, name);  // the ranks compared their collectives when the run began
    if (size_ == 1) {
      ir::copy_operand(call);
      return;
    }
    const MPI_Datatype type = mpi_type(node.dtype());
    switch (node.op()) {
      case ir::OpKind::AllReduce: all_reduce(call, type, name); break;
      case ir::OpKind::Broadcast: {
        ir::copy_operand(call);
        check_mpi(MPI_Bcast(call.out, count(call.out_count, name), type, static_cast<int>(node.attrs()[0]), comm_), name);
        break;
      }
      case ir::OpKind::AllGather: {
        const int n = count(call.in_count, name);
        check_mpi(MPI_Allgather(call.in, n, type, call.out, n, type, comm_), name);
        break;
      }
      case ir::OpKind::ReduceScatter: {
        check_mpi(MPI_Reduce_scatter_block(call.in, call.out, count(call.out_count, name), type, mpi_op(node.attrs()[0]), comm_),
                  name);
        break;
      }
      default: throw Error(fmt::format("{} is not a collective", name));
    }
  }

  /// A graph traced in a world of another size (all_gather and reduce_scatter hold it) would
  /// move the wrong number of elements: the same Error on every rank, before any data moves.
  void check_world(const ir::CollectiveCall& call, std::string_view name) const {
    const ir::Node& node = *call.node;
    int64_t world = size_;
    bool counts = call.in_count == call.out_count;
    if (node.op() == ir::OpKind::AllGather) {
      world = node.attrs()[0];
      counts = call.out_count == call.in_count * size_;
    } else if (node.op() == ir::OpKind::ReduceScatter) {
      world = node.attrs()[1];
      counts = call.in_count == call.out_count * size_;
    }
    if (world != size_ || !counts) {
      throw Error(fmt::format("{}: traced in a world of {} processes, run in a world of {}", name, world, size_));
    }
  }

  static int count(int64_t n, std::string_view name) {
    if (n > INT32_MAX) throw Error(fmt::format("{}: {} elements are more than MPI's int count takes", name, n));
    return static_cast<int>(n);
  }

  /// On the communication thread: every rank's list of signatures, compared through one
  /// all-gather of (count, digest); only when they differ are the lists gathered, to name the
  /// first collective that differs and each rank's operand there. The same Error on every
  /// rank, before any data moves.
  void compare(const std::vector<Signature>& mine) {
    if (size_ == 1) return;
    std::array<uint64_t, 2> summary = {mine.size(), 0};
    for (const Signature& signature : mine) {
      for (int64_t v : signature.values) summary[1] = summary[1] * 1000003 + static_cast<uint64_t>(v);  // wraps: a digest
    }
    std::vector<std::array<uint64_t, 2>> summaries(static_cast<size_t>(size_));
    check_mpi(MPI_Allgather(summary.data(), 2, MPI_UINT64_T, summaries.data(), 2, MPI_UINT64_T, comm_), "collectives");
    if (std::all_of(summaries.begin(), summaries.end(), [&](const auto& s) { return s == summaries[0]; })) return;
    // They differ: gather the lists themselves.
    constexpr int width = static_cast<int>(std::tuple_size_v<decltype(Signature::values)>);
    std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
    for (int r = 0, at = 0; r < size_; ++r) {
      counts[r] = static_cast<int>(summaries[r][0]) * width;
      displs[r] = at;
      at += counts[r];
    }
    std::vector<Signature> flat(static_cast<size_t>((displs.back() + counts.back()) / width));
    check_mpi(MPI_Allgatherv(mine.data(), counts[rank_], MPI_INT64_T, flat.data(), counts.data(), displs.data(), MPI_INT64_T,
                             comm_),
              "collectives");
    std::vector<std::vector<Signature>> lists(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      lists[r].assign(flat.begin() + displs[r] / width, flat.begin() + (displs[r] + counts[r]) / width);
    }
    size_t i = 0;  // the first collective the ranks disagree on
    while (std::all_of(lists.begin(), lists.end(), [&](const auto& l) { return i < l.size() && l[i] == lists[0][i]; })) ++i;
    const bool same_op = std::all_of(lists.begin(), lists.end(), [&](const auto& l) { return i < l.size() && l[i].same_op(lists[0][i]); });
    std::string ranks;
    for (int r = 0; r < size_; ++r) {
      ranks += fmt::format("{}rank {}: {}", r == 0 ? "" : ", ", r, Signature::text_of(lists[r], i, !same_op));
    }
    const std::string name = i < mine.size() ? std::string(ir::op_name(static_cast<ir::OpKind>(mine[i].values[0]))) : "collectives";
    throw Error(same_op ? fmt::format("{}: the ranks' tensors differ ({})", name, ranks)
                        : fmt::format("{}: the ranks run different collectives ({}): every rank must run the same "
                                      "collectives in the same order",
                                      name, ranks));
  }

  /// A sum every rank holds bit for bit: each rank combines one slice of the elements over all
  /// ranks (reduce-scatter), and every rank gathers the combined slices (the same bytes).
  void all_reduce(const ir::CollectiveCall& call, MPI_Datatype type, std::string_view name) {
    const int64_t n = count(call.out_count, name);  // every displacement below fits an int
    std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
    for (int r = 0, at = 0; r < size_; ++r) {
      counts[r] = count(n / size_ + (r < n % size_ ? 1 : 0), name);
      displs[r] = at;
      at += counts[r];
    }
    const int64_t element = dtype_size(call.node->dtype());
    scratch_.resize(static_cast<size_t>(std::max(counts[0], 1) * element));
    check_mpi(MPI_Reduce_scatter(call.in, scratch_.data(), counts.data(), type, mpi_op(call.node->attrs()[0]), comm_), name);
    check_mpi(MPI_Allgatherv(scratch_.data(), counts[rank_], type, call.out, counts.data(), displs.data(), type, comm_), name);
  }

  MPI_Comm comm_;
  double timeout_;
  int rank_ = 0, size_ = 1;
  std::vector<uint8_t> scratch_;  // the communication thread's
  CommThread comm_thread_;        // last: joined first, before the rest goes
};

double MpiRequest::wait() {
  if (!backend_->wait_for(done_)) {
    timed_out_ = true;  // the stuck call may still write the buffers: their owner must keep them
    throw backend_->timed_out(name_);
  }
  return done_.get();
}

struct State {
  std::mutex mutex;
  std::shared_ptr<MpiCollectives> backend;
  bool owns_mpi = false;  // init() called MPI_Init_thread
};

State& state() {
  static State s;
  return s;
}

/// Whether a launcher (Open MPI's mpirun, a PMI or PMIx one) started this process.
bool launched() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

}  // namespace

double timeout_seconds() {
  const char* text = std::getenv("LAZYJIT_DIST_TIMEOUT");
  if (text == nullptr || *text == '\0') return 600.0;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(value > 0)) {
    throw Error(fmt::format("LAZYJIT_DIST_TIMEOUT={}: expected a positive number of seconds", text));
  }
  return value;
}

void init() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (s.backend) return;
  int already = 0;
  MPI_Initialized(&already);
  if (!already && !launched()) return;  // a world of one, without MPI
  const double timeout = timeout_seconds();
  if (!already) {
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "dist::init");
    s.owns_mpi = true;
  }
  // The communication thread makes the calls: MPI must allow threads other than the one that
  // initialised it (a program's own MPI_Init gives MPI_THREAD_SINGLE).
  int level = 0;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_SERIALIZED) {
    if (s.owns_mpi) {
      MPI_Finalize();
      s.owns_mpi = false;
    }
    throw Error(fmt::format("dist::init: MPI runs at thread level {}; lazyjit needs MPI_THREAD_SERIALIZED ({}) or more "
                            "(initialise MPI with MPI_Init_thread, or let dist::init do it)",
                            level, MPI_THREAD_SERIALIZED));
  }
  MPI_Comm comm;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "dist::init");
  check_mpi(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "dist::init");
  s.backend = std::make_shared<MpiCollectives>(comm, timeout);
  ir::set_collectives(s.backend);
}

void finalize() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.backend) return;
  ir::set_collectives(nullptr);
  MPI_Comm comm = s.backend->comm();
  const bool abandoned = s.backend->abandoned();
  s.backend.reset();
  if (abandoned) return;  // a call that will not return holds MPI: freeing or finalising would hang
  MPI_Comm_free(&comm);
  if (s.owns_mpi) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
    s.owns_mpi = false;
  }
}

bool initialized() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.backend != nullptr;
}

void barrier() {
  std::shared_ptr<MpiCollectives> backend;
  {
    State& s = state();
    std::lock_guard lock(s.mutex);
    backend = s.backend;
  }
  if (backend) backend->barrier();
}

}  // namespace lazyjit::dist

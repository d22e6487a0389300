// parallel/shm_group.cpp: collectives through a shared-memory segment: the segment's lifetime, a barrier between
// processes, the chunked all-reduce and broadcast.
#include "parallel/shm_group.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "core/errors.h"
#include "core/log.h"
#include "cuda/cuda_support.h"

namespace rn50::parallel {
namespace {

// The barrier's counters, shared by the processes: lock-free atomics work across processes on one mapping.
struct Header {
  std::atomic<uint64_t> arrived;
  std::atomic<uint64_t> generation;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the barrier's counters are shared between processes");
constexpr int64_t kHeaderBytes = 256;  // the slots start 256-byte aligned

// One mapping of the segment (RAII).
class Mapping {
 public:
  Mapping(void* base, size_t bytes) : base_(base), bytes_(bytes) {}
  ~Mapping() { ::munmap(base_, bytes_); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  char* base() const { return static_cast<char*>(base_); }

 private:
  void* base_;
  size_t bytes_;
};

// A file descriptor closed on every exit (the mapping outlives it).
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string errno_text(int e) { return std::strerror(e); }

class ShmCommunicator final : public Communicator {
 public:
  ShmCommunicator(std::unique_ptr<Mapping> mapping, int rank, int world, int64_t chunk_bytes,
                  std::chrono::milliseconds timeout, size_t bytes, bool cuda)
      : mapping_(std::move(mapping)), rank_(rank), world_(world), chunk_bytes_(chunk_bytes), timeout_(timeout) {
    // Page-locked, the copies to and from a GPU run at DMA speed instead of through CUDA's staging buffers.
    if (cuda) {
      std::string why;
      pinned_ = cuda::register_host_memory(mapping_->base(), bytes, &why);
      if (!pinned_) log_warn("data parallel (shm): the segment is not page-locked (" + why + "): slower copies");
    }
  }

  std::string backend() const override { return "shm"; }

  std::function<void()> start_mean(at::Tensor tensor) override {
    return [this, tensor]() mutable { reduce(tensor, /*mean=*/true); };
  }

  void sum(at::Tensor tensor) override { reduce(tensor, /*mean=*/false); }

  void broadcast_from_rank0(std::vector<at::Tensor> tensors) override {
    for (auto& t : tensors) {
      at::Tensor flat = dense(t);
      const int64_t step = chunk_elements(flat);
      for (int64_t offset = 0; offset < flat.numel(); offset += step) {
        const int64_t n = std::min(step, flat.numel() - offset);
        if (rank_ == 0) slot(0, n, flat.scalar_type()).copy_(flat.narrow(0, offset, n));
        barrier();
        if (rank_ != 0) flat.narrow(0, offset, n).copy_(slot(0, n, flat.scalar_type()));
        barrier();  // every rank has read slot 0 before rank 0 writes the next chunk
      }
      if (!flat.is_same(t) && rank_ != 0) t.copy_(flat.view(t.sizes()));
    }
  }

  void shutdown() override {
    pinned_.reset();
    mapping_.reset();
  }

 private:
  // A contiguous 1-D view of `t`, or a contiguous copy (a channels-last weight) copied back by the caller.
  static at::Tensor dense(const at::Tensor& t) { return t.is_contiguous() ? t.view(-1) : t.contiguous().view(-1); }

  int64_t chunk_elements(const at::Tensor& t) const {
    return std::max<int64_t>(1, chunk_bytes_ / static_cast<int64_t>(t.element_size()));
  }

  at::Tensor slot(int r, int64_t n, at::ScalarType dtype) const {
    char* base = mapping_->base() + kHeaderBytes + static_cast<int64_t>(r) * chunk_bytes_;
    return at::from_blob(base, {n}, at::TensorOptions().dtype(dtype).device(at::kCPU));
  }

  // Sums (mean: then divides by the ranks) in place. The slots are added in rank order on every rank, so the ranks'
  // results are the same bits.
  void reduce(at::Tensor& tensor, bool mean) {
    if (!mapping_) throw std::runtime_error("data parallel (shm): a collective after shutdown");
    at::Tensor flat = dense(tensor);
    const int64_t step = chunk_elements(flat);
    for (int64_t offset = 0; offset < flat.numel(); offset += step) {
      const int64_t n = std::min(step, flat.numel() - offset);
      slot(rank_, n, flat.scalar_type()).copy_(flat.narrow(0, offset, n));  // from a GPU: waits for the stream
      barrier();
      // On a GPU the slots are added there (no CPU threads busy), else on the CPU. Each copy from a slot finishes
      // before the call returns (a blocking copy), so the slots are free once the loop is done.
      at::Tensor total = slot(0, n, flat.scalar_type()).to(flat.device(), /*non_blocking=*/false, /*copy=*/true);
      for (int r = 1; r < world_; ++r) total.add_(slot(r, n, flat.scalar_type()).to(flat.device()));
      barrier();  // every rank has read every slot before any writes the next chunk
      if (mean) total.div_(world_);
      flat.narrow(0, offset, n).copy_(total);
    }
    if (!flat.is_same(tensor)) tensor.copy_(flat.view(tensor.sizes()));
  }

  // Sense-reversing barrier: the last rank to arrive resets the count and moves the generation on.
  void barrier() {
    auto* header = reinterpret_cast<Header*>(mapping_->base());
    const uint64_t generation = header->generation.load(std::memory_order_acquire);
    if (header->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint64_t>(world_)) {
      header->arrived.store(0, std::memory_order_relaxed);
      header->generation.fetch_add(1, std::memory_order_release);
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (int spins = 0; header->generation.load(std::memory_order_acquire) == generation; ++spins) {
      if (spins < 2000) {
        std::this_thread::yield();
        continue;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      if ((spins & 1023) == 0 && std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error(strprintf(
            "data parallel (shm): rank %d waited %lld s for the other ranks at a collective (dist_timeout_s); "
            "another rank probably died or hangs",
            rank_, static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(timeout_).count())));
      }
    }
  }

  std::unique_ptr<Mapping> mapping_;
  std::shared_ptr<void> pinned_;  // the segment page-locked, for GPU copies
  int rank_, world_;
  int64_t chunk_bytes_;
  std::chrono::milliseconds timeout_;
};

std::string random_name() {
  std::random_device device;
  return strprintf("/rn50-%d-%08x", static_cast<int>(::getpid()), device());
}

}  // namespace

std::unique_ptr<Communicator> make_shm_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world,
                                                    std::chrono::milliseconds timeout, bool cuda, int64_t chunk_bytes) {
  if (chunk_bytes < 256 || chunk_bytes % 256 != 0) throw std::invalid_argument("shm chunk_bytes: a multiple of 256");
  const auto bytes = static_cast<size_t>(kHeaderBytes + static_cast<int64_t>(world) * chunk_bytes);
  const std::string name_key = "rn50/shm/name", mapped_key = "rn50/shm/mapped";
  std::string name;
  int fd = -1;
  if (rank == 0) {
    name = random_name();
    fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) throw ConfigError("data parallel (shm): cannot create " + name + " in /dev/shm: " + errno_text(errno));
    // Reserved now: a /dev/shm too small (a container's --shm-size) fails here, not later with SIGBUS.
    const int e = ::ftruncate(fd, static_cast<off_t>(bytes)) == 0 ? ::posix_fallocate(fd, 0, static_cast<off_t>(bytes))
                                                                  : errno;
    if (e != 0) {
      ::close(fd);
      ::shm_unlink(name.c_str());
      throw ConfigError(strprintf("data parallel (shm): cannot reserve %zu bytes in /dev/shm (%s; a container's "
                                  "--shm-size?)",
                                  bytes, errno_text(e).c_str()));
    }
  } else {
    const auto value = store->get(name_key);  // waits for rank 0, within the store's timeout
    name.assign(value.begin(), value.end());
    fd = ::shm_open(name.c_str(), O_RDWR, 0);
    if (fd < 0) throw ConfigError("data parallel (shm): cannot open rank 0's " + name + ": " + errno_text(errno));
  }
  Fd owned(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
    if (rank == 0) ::shm_unlink(name.c_str());
    throw ConfigError("data parallel (shm): " + name + " is smaller than the " + std::to_string(bytes) +
                      " bytes expected (ranks with different chunk sizes?)");
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    if (rank == 0) ::shm_unlink(name.c_str());
    throw ConfigError("data parallel (shm): cannot map " + name + ": " + errno_text(errno));
  }
  auto mapping = std::make_unique<Mapping>(base, bytes);
  if (rank == 0) {
    new (mapping->base()) Header{{0}, {0}};
    store->set(name_key, std::vector<uint8_t>(name.begin(), name.end()));
  }
  // Once every rank has mapped it, the name goes: the memory lives while mapped, and a dead run leaves nothing behind.
  store->add(mapped_key, 1);
  if (rank == 0) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (store->add(mapped_key, 0) < world) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::shm_unlink(name.c_str());
        throw ConfigError("data parallel (shm): not every rank mapped " + name + " within dist_timeout_s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ::shm_unlink(name.c_str());
  }
  return std::make_unique<ShmCommunicator>(std::move(mapping), rank, world, chunk_bytes, timeout, bytes, cuda);
}

}  // namespace rn50::parallel

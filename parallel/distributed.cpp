// parallel/distributed.cpp: rendezvous, backend choice and consistency checks of a data-parallel run.
#include "parallel/distributed.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef RN50_HAVE_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <sstream>
#include <thread>

#include "core/errors.h"
#include "core/log.h"
#include "core/stop.h"
#include "cuda/cuda_support.h"
#include "parallel/c10d_adapter.h"
#include "parallel/nccl_group.h"
#include "parallel/shm_group.h"

namespace rn50::parallel {
namespace {

std::unique_ptr<Communicator> make_gloo_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world,
                                                     std::chrono::milliseconds timeout, bool cuda) {
#ifdef RN50_HAVE_GLOO
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  // The default device binds to the address this host's name resolves to, or to loopback.
  options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  options->threads = 2;
  auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);
  auto comm = std::make_unique<C10dCommunicator<c10d::ProcessGroupGloo>>(group, world, "gloo",
                                                                         /*average_natively=*/false);
  // On GPUs Gloo orders its copies to the host after the calling thread's current stream, as NCCL orders its work.
  if (cuda) return on_training_stream(std::move(comm));
  return comm;
#else
  (void)store, (void)rank, (void)world, (void)timeout, (void)cuda;
  throw ConfigError(
      "dist_backend gloo (the CPU, or ranks sharing a GPU) needs Gloo, and this rn50 was built without it "
      "(LibTorch with Gloo headers; on Debian: apt-get install libgloo-dev, then rebuild)");
#endif
}

// Where this rank trains, as "host\ngpu" (see RankDevice): the GPU by UUID, so that one GPU under two
// CUDA_VISIBLE_DEVICES orders is still one GPU.
std::string device_identity(c10::Device device) {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::string id = std::string(host) + "\n";
  if (!device.is_cuda()) return id;
  if (const auto facts = cuda::device_facts(device.index())) {
    for (const unsigned char b : facts->uuid) id += strprintf("%02x", b);
  } else {
    id += "cuda:" + std::to_string(device.index());
  }
  return id;
}

std::vector<RankDevice> parse_identities(const std::vector<std::string>& ids) {
  std::vector<RankDevice> out;
  for (const auto& id : ids) {
    const size_t cut = id.find('\n');
    out.push_back(cut == std::string::npos ? RankDevice{id, ""} : RankDevice{id.substr(0, cut), id.substr(cut + 1)});
  }
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Counts this rank in and waits until all `world` ranks have, at most `timeout` after `start`: the one wait of the
// rendezvous. (TCPStore's own, waitWorkers, gives up silently after its timeout plus up to a second, and the process
// group's rendezvous then waited the whole timeout again.) Throws ConfigError, beginning with `where`, when they have
// not all come, or when rank 0's store went away meanwhile; stop::StoppedBeforeTraining when a stop is asked for.
void join_all(c10d::Store& store, int world, std::chrono::steady_clock::time_point start,
              std::chrono::milliseconds timeout, const std::string& where) {
  const std::string key = "rn50/joined";
  int64_t joined = store.add(key, 1);
  for (auto now = std::chrono::steady_clock::now(); joined < world; now = std::chrono::steady_clock::now()) {
    if (const int signal = stop::requested()) {  // docker stop or scancel at start-up: no need to wait out the timeout
      throw stop::StoppedBeforeTraining(
          signal,
          strprintf("stopped by %s while waiting for the other ranks (%lld of %d had come in %.1f s); "
                    "nothing to resume",
                    stop::signal_name(signal).c_str(), static_cast<long long>(joined), world, seconds_since(start)));
    }
    if (now >= start + timeout) {
      throw ConfigError(
          strprintf("%s: %lld of %d ranks came in %.1f s (the others did not start, or were given "
                    "another MASTER_ADDR, MASTER_PORT or WORLD_SIZE)",
                    where.c_str(), static_cast<long long>(joined), world, seconds_since(start)));
    }
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(std::chrono::milliseconds(20), start + timeout - now));
    try {
      joined = store.add(key, 0);
    } catch (const std::exception& e) {
      throw ConfigError(strprintf(
          "%s: rank 0's store went away after %.1f s, when %lld of %d ranks had come (rank 0 "
          "gave up waiting for the others, or died): %s",
          where.c_str(), seconds_since(start), static_cast<long long>(joined), world, first_line(e.what()).c_str()));
    }
  }
}

// Whether something accepts a TCP connection at host:port within `wait` (a connection opened and closed at once).
bool accepts_connections(const std::string& host, int port, std::chrono::milliseconds wait) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return false;
  bool accepted = false;
  for (addrinfo* a = found; a != nullptr && !accepted; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      accepted = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int error = 0;
      socklen_t length = sizeof error;
      accepted = ::poll(&p, 1, static_cast<int>(wait.count())) == 1 &&
                 ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0;
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return accepted;
}

// A rank other than 0 waits here until rank 0's store accepts connections, at most `timeout` after `start`, so that a
// stop asked for meanwhile ends the wait (c10d's TCPStore retries its connection inside its constructor, deaf to
// signals, until its timeout). Throws as join_all does.
void wait_for_rank0(const std::string& host, int port, std::chrono::steady_clock::time_point start,
                    std::chrono::milliseconds timeout, const std::string& where) {
  while (!accepts_connections(host, port, std::chrono::milliseconds(200))) {
    if (const int signal = stop::requested()) {
      throw stop::StoppedBeforeTraining(
          signal, strprintf("stopped by %s while waiting %.1f s for rank 0 at %s:%d; nothing to resume",
                            stop::signal_name(signal).c_str(), seconds_since(start), host.c_str(), port));
    }
    if (std::chrono::steady_clock::now() >= start + timeout) {
      throw ConfigError(
          strprintf("%s: nothing accepted a connection there in %.1f s (rank 0 did not start, or was "
                    "given another MASTER_ADDR or MASTER_PORT)",
                    where.c_str(), seconds_since(start)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream is(text);
  for (std::string line; std::getline(is, line);) out.push_back(line);
  return out;
}

// The lines of `mine` that `reference` lacks and the other way round, at most a few of each.
std::string difference(const std::string& reference, const std::string& mine) {
  const auto a = lines_of(reference), b = lines_of(mine);
  std::string out;
  int shown = 0;
  for (size_t i = 0; i < std::max(a.size(), b.size()) && shown < 3; ++i) {
    const std::string x = i < a.size() ? a[i] : "(nothing)", y = i < b.size() ? b[i] : "(nothing)";
    if (x == y) continue;
    out += (out.empty() ? "" : "; ") + ("'" + y + "' where rank 0 has '" + x + "'");
    ++shown;
  }
  return out;
}

}  // namespace

std::string choose_backend(DistributedOptions::Backend asked, const std::vector<RankDevice>& devices,
                           std::string* why) {
  using Backend = DistributedOptions::Backend;
  size_t on_cpu = 0;
  bool one_host = true;
  for (const auto& d : devices) {
    on_cpu += d.gpu.empty();
    one_host = one_host && d.host == devices.front().host;
  }
  if (on_cpu != 0 && on_cpu != devices.size()) {
    throw ConfigError("data parallel: some ranks run on the CPU and others on GPUs; give every rank the same device kind");
  }
  if (asked == Backend::kShm && !one_host) {
    throw ConfigError("config key 'dist_backend': shm needs every rank on one host; these ranks run on several");
  }
  if (on_cpu == devices.size()) {
    if (asked == Backend::kNccl) throw ConfigError("config key 'dist_backend': nccl needs GPUs; this run is on the CPU");
    if (asked == Backend::kShm) {
      *why = "as dist_backend asks: shared host memory";
      return "shm";
    }
    *why = "the ranks run on the CPU";
    return "gloo";
  }
  // Two ranks on one GPU: NCCL refuses them ("Duplicate GPU detected").
  std::string shared;
  for (size_t a = 0; a < devices.size() && shared.empty(); ++a) {
    for (size_t b = a + 1; b < devices.size(); ++b) {
      if (devices[a].host == devices[b].host && devices[a].gpu == devices[b].gpu) {
        shared = strprintf("ranks %zu and %zu share a GPU", a, b);
        break;
      }
    }
  }
  if (asked == Backend::kGloo || asked == Backend::kShm) {
    *why = "as dist_backend asks: gradients through host memory, no CUDA graph";
    return asked == Backend::kGloo ? "gloo" : "shm";
  }
  if (!shared.empty()) {
    if (asked == Backend::kNccl || !one_host) {
      throw ConfigError("config key 'dist_backend': NCCL needs a GPU per rank, and " + shared +
                        (one_host ? "; use dist_backend auto or shm, or as many GPUs as ranks"
                                  : "; shared memory needs every rank on one host: give each rank a GPU"));
    }
    *why = shared + ", which NCCL refuses: gradients through shared host memory, no CUDA graph";
    return "shm";
  }
  *why = "a GPU per rank";
  return "nccl";
}

struct Distributed::Impl {
  c10::intrusive_ptr<c10d::Store> store;
};

Distributed::Distributed(const LaunchEnv& launch, const DistributedOptions& options, c10::Device device)
    : launch_(launch), impl_(std::make_unique<Impl>()) {
  const std::string host = launch.master_addr.empty() ? "127.0.0.1" : launch.master_addr;
  const int port = launch.master_port > 0 ? launch.master_port : 29500;
  const std::chrono::milliseconds timeout(static_cast<int64_t>(options.timeout_s) * 1000);
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(port);
  store_options.isServer = launch.rank == 0;
  store_options.numWorkers = launch.world_size;
  store_options.waitWorkers = false;  // join_all waits instead, once, with a deadline and a count
  store_options.timeout = timeout;
  // Every rank waits at most dist_timeout_s in all (connecting, then the others) before the process group is made;
  // a rank that never comes stops the run here.
  const auto start = std::chrono::steady_clock::now();
  const std::string where = strprintf("rank %d of %d could not join the run at %s:%d within dist_timeout_s=%d",
                                      launch.rank, launch.world_size, host.c_str(), port, options.timeout_s);
  try {
    if (launch.rank != 0) {
      log_info(strprintf("data parallel: rank %d of %d waiting for rank 0 at %s:%d", launch.rank, launch.world_size,
                         host.c_str(), port));
      wait_for_rank0(host, port, start, timeout, where);
    }
    impl_->store = c10::make_intrusive<c10d::TCPStore>(host, store_options);
    join_all(*impl_->store, launch.world_size, start, timeout, where);
    const std::string backend = choose_backend(
        options.backend, parse_identities(exchange("device", device_identity(device))), &backend_reason_);
    if (backend == "nccl") {
      comm_ = parallel::make_nccl_communicator(impl_->store, launch.rank, launch.world_size, timeout);
    } else if (backend == "shm") {
      comm_ = make_shm_communicator(impl_->store, launch.rank, launch.world_size, timeout, device.is_cuda());
    } else {
      comm_ = make_gloo_communicator(impl_->store, launch.rank, launch.world_size, timeout, device.is_cuda());
    }
  } catch (const ConfigError&) {
    throw;
  } catch (const stop::StoppedBeforeTraining&) {
    throw;
  } catch (const std::exception& e) {
    throw ConfigError(
        strprintf("%s: %s (rn50 waited %.1f s)", where.c_str(), first_line(e.what()).c_str(), seconds_since(start)));
  }
}

void Distributed::shutdown() {
  if (!comm_) return;
  comm_->shutdown();
  comm_.reset();
  // Rank 0 serves the store: it stays until the others have closed their process groups, whose monitor
  // threads read the store until then (bounded: a rank that died does not hold it up for long).
  impl_->store->set("done/" + std::to_string(rank()), std::vector<uint8_t>{1});
  if (rank() == 0) {
    std::vector<std::string> keys;
    for (int r = 1; r < world_size(); ++r) keys.push_back("done/" + std::to_string(r));
    try {
      impl_->store->wait(keys, std::chrono::seconds(30));
    } catch (const std::exception&) {
      log_warn("data parallel: not every rank said it was done within 30 s; closing the store anyway");
    }
  }
}

Distributed::~Distributed() {
  // After an error: close the communicators without waiting for the other ranks.
  try {
    if (comm_) comm_->shutdown();
  } catch (const std::exception& e) {
    log_warn(std::string("data parallel: closing the process group failed: ") + e.what());
  }
}

std::vector<std::string> Distributed::exchange(const std::string& what, const std::string& mine) {
  const std::string prefix = what + "/" + std::to_string(exchanges_++) + "/";
  impl_->store->set(prefix + std::to_string(rank()), std::vector<uint8_t>(mine.begin(), mine.end()));
  std::vector<std::string> all;
  for (int r = 0; r < world_size(); ++r) {
    const auto bytes = impl_->store->get(prefix + std::to_string(r));
    all.emplace_back(bytes.begin(), bytes.end());
  }
  return all;
}

void Distributed::check_same(const std::string& what, const std::string& text) {
  const std::vector<std::string> all = exchange("check/" + what, text);
  for (int r = 1; r < world_size(); ++r) {
    if (all[static_cast<size_t>(r)] != all[0]) {
      throw ConfigError(strprintf("rank %d runs a different %s than rank 0: %s", r, what.c_str(),
                                  difference(all[0], all[static_cast<size_t>(r)]).c_str()));
    }
  }
}

std::vector<double> Distributed::all_values(const std::string& what, double value) {
  std::vector<double> out;
  for (const std::string& v : exchange(what, strprintf("%.17g", value))) out.push_back(std::stod(v));
  return out;
}

std::string describe_tensors(const std::vector<std::pair<std::string, at::Tensor>>& named) {
  std::string out;
  for (const auto& [name, t] : named) {
    out += name + " " + std::string(c10::toString(t.scalar_type())) + " [";
    for (int64_t d = 0; d < t.dim(); ++d) out += (d ? "," : "") + std::to_string(t.size(d));
    out += "]\n";
  }
  return out;
}

}  // namespace rn50::parallel

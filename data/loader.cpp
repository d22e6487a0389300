// data/loader.cpp: BatchPool, and BatchLoader, whose decode threads share the oldest unfinished batches in small
// chunks and hand batches out strictly in order.
#include "data/loader.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/affinity.h"
#include "core/errors.h"

namespace rn50::data {

BatchPool::BatchPool(int slots, int batch_size, int image_size, std::shared_ptr<HostAllocator> allocator,
                     BatchContent content)
    : batch_size_(batch_size), image_size_(image_size), allocator_(std::move(allocator)) {
  if (slots < 1) throw ConfigError("batch pool needs at least 1 slot (got " + std::to_string(slots) + ")");
  if (batch_size < 1) throw ConfigError("batch size must be at least 1 (got " + std::to_string(batch_size) + ")");
  if (image_size < 1) throw ConfigError("image size must be at least 1 (got " + std::to_string(image_size) + ")");
  if (!allocator_) throw std::invalid_argument("BatchPool: no allocator");
  const bool pixels = content != BatchContent::kEncoded;
  const bool encoded = content != BatchContent::kPixels;
  const size_t image_bytes = static_cast<size_t>(batch_size) * image_size * image_size * 3;
  const size_t label_bytes = static_cast<size_t>(batch_size) * sizeof(int64_t);
  try {
    for (int s = 0; s < slots; ++s) {
      images_.push_back(nullptr);
      labels_.push_back(nullptr);
      if (pixels) images_.back() = static_cast<uint8_t*>(allocator_->allocate(image_bytes));
      labels_.back() = static_cast<int64_t*>(allocator_->allocate(label_bytes));
    }
    if (encoded) {
      encoded_.assign(static_cast<size_t>(slots), std::vector<EncodedSample>(static_cast<size_t>(batch_size)));
    }
  } catch (...) {
    // The destructor does not run for a half-built pool.
    for (uint8_t* p : images_) allocator_->deallocate(p);
    for (int64_t* p : labels_) allocator_->deallocate(p);
    throw;
  }
}

BatchPool::~BatchPool() {
  for (uint8_t* p : images_) allocator_->deallocate(p);
  for (int64_t* p : labels_) allocator_->deallocate(p);
}

std::vector<int> replacement_sources(const std::vector<bool>& decoded) {
  const int n = static_cast<int>(decoded.size());
  std::vector<int> source(decoded.size(), -1);
  // Walk backwards twice around the ring, carrying the nearest decoded position at or after each one.
  int next_good = -1;
  for (int k = 2 * n - 1; k >= 0; --k) {
    const int i = k % n;
    if (decoded[static_cast<size_t>(i)]) next_good = i;
    if (k < n) source[static_cast<size_t>(i)] = next_good;
  }
  if (n > 0 && next_good < 0) throw DecodeError("no image of the batch could be decoded");
  return source;
}

bool decode_on_cpu(const CpuDecodeShare& share, int64_t i, int64_t ready) {
  switch (share.mode) {
    case CpuDecodeShare::Mode::kOff:
      return false;
    case CpuDecodeShare::Mode::kFixed: {
      // Evenly spread: 0.5 takes every second position, 0.25 every fourth, 1 all of them.
      const auto before = static_cast<int64_t>(static_cast<double>(i) * share.fraction);
      const auto after = static_cast<int64_t>(static_cast<double>(i + 1) * share.fraction);
      return after > before;
    }
    case CpuDecodeShare::Mode::kAuto:
      return ready >= share.ready_batches;
  }
  return false;
}

struct BatchLoader::State {
  State(const ImageDataset& dataset_in, std::vector<size_t> order_in, uint64_t epoch_in,
        const LoaderOptions& options_in, BatchPool& pool_in, BadSampleHandler handler_in,
        std::atomic<int64_t>& bad_count_in, std::atomic<int64_t>& cpu_decoded_in)
      : dataset(dataset_in),
        order(std::move(order_in)),
        epoch(epoch_in),
        options(options_in),
        pool(pool_in),
        on_bad_sample(std::move(handler_in)),
        bad_count(bad_count_in),
        cpu_decoded(cpu_decoded_in) {}

  // --- fixed for the epoch ---
  const ImageDataset& dataset;
  const std::vector<size_t> order;
  const uint64_t epoch;
  const LoaderOptions options;
  BatchPool& pool;
  const BadSampleHandler on_bad_sample;
  std::atomic<int64_t>& bad_count;
  std::atomic<int64_t>& cpu_decoded;
  int64_t batch_size = 0;
  int slots = 0;
  int64_t num_batches = 0;
  int64_t chunk = 0;  // samples per work unit
  int64_t units_per_batch = 0;
  int64_t total_units = 0;
  size_t image_bytes = 0;  // one image

  // --- work distribution ---
  std::atomic<int64_t> next_unit{0};  // units are claimed in order, so the oldest batches finish first
  std::atomic<bool> stop{false};
  // The CPU share's kAuto: batches finished by the workers and handed out by next() (their difference: the batches
  // waiting).
  std::atomic<int64_t> batches_finished{0}, batches_handed_out{0};

  // --- guarded by mutex ---
  std::mutex mutex;
  std::condition_variable slot_freed;                             // workers wait here for their batch's slot
  std::condition_variable batch_done;                             // the consumer waits here for the next batch
  std::vector<int64_t> slot_batch;                                // per slot: the batch that may be written there now
  std::vector<int64_t> slot_units_done;                           // per slot: finished units of that batch
  int64_t next_batch = 0;                                         // the batch next() hands out next
  int64_t failed_position = std::numeric_limits<int64_t>::max();  // earliest order position that failed
  std::exception_ptr error;                                       // why it failed
  int active_workers = 0;
  // pin_first_cpu: each worker pins itself first (pinning a thread from outside could pin the caller instead, if
  // the worker had already returned: glibc then applies the mask to the calling thread) and reports here.
  std::vector<int> pin_cpus;
  int pin_reports = 0, pinned_workers = 0;
  std::condition_variable pin_reported;

  // --- bad samples ---
  std::mutex bad_mutex;                               // also serialises calls of on_bad_sample
  std::unordered_map<size_t, std::string> known_bad;  // dataset index -> reason, this epoch

  std::vector<std::thread> threads;
  WorkerScratch consumer_scratch;  // workers == 0 decodes with this

  int64_t batch_length(int64_t b) const {
    return std::min<int64_t>(batch_size, static_cast<int64_t>(order.size()) - b * batch_size);
  }

  int64_t failed_batch() const { return failed_position / batch_size; }  // callers hold `mutex`

  int64_t unit_batch(int64_t unit) const { return unit / units_per_batch; }
  int64_t unit_first_position(int64_t unit) const {
    return unit_batch(unit) * batch_size + (unit % units_per_batch) * chunk;
  }

  // Keeps the error of the earliest position, so that the error next() throws does not depend on timing.
  void record_error(int64_t position, std::exception_ptr e) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (position < failed_position) {
        failed_position = position;
        error = std::move(e);
      }
    }
    batch_done.notify_all();
    slot_freed.notify_all();
  }

  // The message for a bad sample: the reason, with the sample's description unless the reason has it already.
  std::string name_sample(size_t index, const std::string& reason) const {
    const std::string what = dataset.describe(index);
    return reason.find(what) != std::string::npos ? reason : what + ": " + reason;
  }

  // The reason sample `index` failed earlier in this epoch, if it did.
  bool known_bad_reason(size_t index, std::string& reason) {
    std::lock_guard<std::mutex> lock(bad_mutex);
    auto it = known_bad.find(index);
    if (it == known_bad.end()) return false;
    reason = it->second;
    return true;
  }

  // Counts and reports each bad sample once per epoch, however many positions try it.
  void report_bad(size_t index, const std::string& reason) {
    std::lock_guard<std::mutex> lock(bad_mutex);
    if (!known_bad.emplace(index, reason).second) return;
    bad_count.fetch_add(1);
    if (on_bad_sample) on_bad_sample(dataset.describe(index), reason);
  }

  // An encoded sample that the CPU share takes, decoded into `image`. Any failure (libjpeg's, a header that
  // disagrees with libjpeg, memory) leaves it compressed: the device's routes try it and report it if nothing decodes
  // it, as they catch the same, so the counts are those without the share.
  void decode_share(int64_t i, EncodedSample& encoded, uint8_t* image, WorkerScratch& scratch) {
    encoded.predecoded = false;
    if (image == nullptr || !decode_on_cpu(options.cpu_share, i, batches_finished.load() - batches_handed_out.load()))
      return;
    try {
      dataset.decode_encoded(encoded, image, scratch);
      encoded.predecoded = true;
      cpu_decoded.fetch_add(1);
    } catch (const std::exception&) {
    }
  }

  // Fills one image (or, for encoded pools, one encoded sample) and label for order position `position`,
  // replacing a bad sample by the next positions.
  void load_position(int64_t position, uint8_t* image, EncodedSample* encoded, int64_t* label, WorkerScratch& scratch) {
    const size_t n = order.size();
    int64_t failures = 0;
    if (encoded != nullptr) encoded->skipped = false;
    for (size_t k = 0;; ++k) {
      const size_t index = order[(static_cast<size_t>(position) + k) % n];
      std::string reason;
      if (!known_bad_reason(index, reason)) {
        try {
          if (encoded != nullptr) {
            dataset.load_encoded(index, epoch, *encoded, scratch.budget);
            decode_share(position % batch_size, *encoded, image, scratch);
          } else
            dataset.load(index, epoch, image, scratch);
          *label = dataset.label(index);
          return;
        } catch (const DecodeError& e) {
          reason = e.what();
        }
        // Strict mode skips nothing: the error names the file, and no "skipped" report comes before it.
        if (options.strict) throw DecodeError("bad sample (strict mode): " + name_sample(index, reason));
        report_bad(index, reason);
      }
      if (!options.replace_bad) {
        *label = kSkippedLabel;
        if (image != nullptr) std::memset(image, 0, image_bytes);  // counted nowhere; zeros rather than stale pixels
        if (encoded != nullptr) {
          encoded->skipped = true;
          encoded->predecoded = false;
        }
        return;
      }
      ++failures;
      if (failures > options.max_replacements || static_cast<size_t>(failures) >= n)
        throw DecodeError("too many consecutive bad samples (" + std::to_string(failures) + ") from order position " +
                          std::to_string(position) + ", starting with " +
                          dataset.describe(order[static_cast<size_t>(position) % n]) +
                          "; last: " + name_sample(index, reason));
    }
  }

  // Decodes the samples of work unit `unit` into its batch's slot. Returns false when a sample failed (the
  // error is recorded) or when stopping.
  bool fill_unit(int64_t unit, WorkerScratch& scratch) {
    const int64_t b = unit_batch(unit);
    const int slot = static_cast<int>(b % slots);
    const int64_t begin = (unit % units_per_batch) * chunk;
    const int64_t end = std::min(begin + chunk, batch_length(b));
    uint8_t* images = pool.images(slot);
    EncodedSample* encoded = pool.encoded(slot);
    int64_t* labels = pool.labels(slot);
    for (int64_t i = begin; i < end; ++i) {
      if (stop.load(std::memory_order_relaxed)) return false;
      const int64_t position = b * batch_size + i;
      try {
        load_position(position, images != nullptr ? images + static_cast<size_t>(i) * image_bytes : nullptr,
                      encoded != nullptr ? encoded + i : nullptr, labels + i, scratch);
      } catch (...) {
        record_error(position, std::current_exception());
        return false;
      }
    }
    return true;
  }

  void worker_loop() {
    WorkerScratch scratch;
    scratch.budget = options.decode_budget.get();
    for (;;) {
      const int64_t unit = next_unit.fetch_add(1);
      if (unit >= total_units) return;
      const int64_t b = unit_batch(unit);
      const int64_t first_position = unit_first_position(unit);
      const int slot = static_cast<int>(b % slots);
      {
        std::unique_lock<std::mutex> lock(mutex);
        // Units are claimed in order, so every earlier unit is already in some worker's hands; units past a
        // failure are not needed any more.
        slot_freed.wait(lock, [&] { return stop.load() || first_position > failed_position || slot_batch[slot] == b; });
        if (stop.load() || first_position > failed_position) return;
      }
      if (!fill_unit(unit, scratch)) return;
      bool complete = false;
      {
        std::lock_guard<std::mutex> lock(mutex);
        complete = ++slot_units_done[slot] == units_per_batch;
      }
      if (complete) {
        batches_finished.fetch_add(1);
        batch_done.notify_all();
      }
    }
  }

  void worker_main(int64_t k) {
    if (!pin_cpus.empty()) {
      const bool pinned = pin_this_thread(cpu_in_turn(pin_cpus, options.pin_first_cpu + k));
      {
        std::lock_guard<std::mutex> lock(mutex);
        ++pin_reports;
        pinned_workers += pinned ? 1 : 0;
      }
      pin_reported.notify_all();
    }
    try {
      worker_loop();
    } catch (...) {
      record_error(0, std::current_exception());  // not a sample's error (e.g. out of memory): fail at once
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      --active_workers;
    }
    batch_done.notify_all();
  }

  void shutdown() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop.store(true);
    }
    slot_freed.notify_all();
    batch_done.notify_all();
    for (std::thread& t : threads) {
      if (t.joinable()) t.join();
    }
    threads.clear();
  }
};

BatchLoader::BatchLoader(const ImageDataset& dataset, std::vector<size_t> order, uint64_t epoch,
                         const LoaderOptions& options, BatchPool& pool, BadSampleHandler on_bad_sample) {
  if (options.batch_size < 1 || options.batch_size > pool.batch_size())
    throw ConfigError("loader batch size " + std::to_string(options.batch_size) + " must be in 1.." +
                      std::to_string(pool.batch_size()) + " (the pool's batch size)");
  if (options.workers < 0)
    throw ConfigError("loader workers must be >= 0 (got " + std::to_string(options.workers) + ")");
  if (options.pin_first_cpu < -1)
    throw ConfigError("loader pin_first_cpu must be -1 (not pinned) or >= 0 (got " +
                      std::to_string(options.pin_first_cpu) + ")");
  if (options.max_replacements < 0)
    throw ConfigError("max_replacements must be >= 0 (got " + std::to_string(options.max_replacements) + ")");
  const size_t dataset_size = dataset.size();
  for (size_t index : order) {
    if (index >= dataset_size)
      throw std::out_of_range("epoch order holds sample " + std::to_string(index) + " but the dataset has " +
                              std::to_string(dataset_size));
  }

  const CpuDecodeShare& share = options.cpu_share;
  if (share.mode != CpuDecodeShare::Mode::kOff && (pool.images(0) == nullptr || pool.encoded(0) == nullptr))
    throw std::logic_error("BatchLoader: a CPU decode share needs a pool of encoded samples with pixel room");
  if (share.mode == CpuDecodeShare::Mode::kFixed && !(share.fraction >= 0 && share.fraction <= 1))
    throw ConfigError("the CPU decode share must be 0 to 1 (got " + std::to_string(share.fraction) + ")");
  if (share.mode == CpuDecodeShare::Mode::kAuto && share.ready_batches < 1)
    throw ConfigError("the automatic CPU decode share needs ready_batches >= 1");

  state_ = std::make_unique<State>(dataset, std::move(order), epoch, options, pool, std::move(on_bad_sample),
                                   bad_samples_, cpu_decoded_);
  State& s = *state_;
  const int64_t n = static_cast<int64_t>(s.order.size());
  s.batch_size = options.batch_size;
  s.slots = pool.slots();
  s.num_batches = options.drop_last ? n / s.batch_size : (n + s.batch_size - 1) / s.batch_size;
  // A few samples per unit: small enough that all workers share one batch, large enough to keep the counter cool.
  s.chunk = options.workers > 0 ? std::clamp<int64_t>(s.batch_size / (4 * options.workers), 1, 8) : s.batch_size;
  s.units_per_batch = (s.batch_size + s.chunk - 1) / s.chunk;
  s.total_units = s.num_batches * s.units_per_batch;
  s.image_bytes = static_cast<size_t>(pool.image_size()) * pool.image_size() * 3;
  s.slot_batch.resize(static_cast<size_t>(s.slots));
  for (int slot = 0; slot < s.slots; ++slot) s.slot_batch[static_cast<size_t>(slot)] = slot;
  s.slot_units_done.assign(static_cast<size_t>(s.slots), 0);
  s.consumer_scratch.budget = options.decode_budget.get();
  num_batches_ = s.num_batches;

  const int64_t thread_count = std::min<int64_t>(options.workers, s.total_units);
  if (options.pin_first_cpu >= 0) s.pin_cpus = usable_cpus();
  try {
    for (int64_t t = 0; t < thread_count; ++t) {
      {
        std::lock_guard<std::mutex> lock(s.mutex);
        ++s.active_workers;
      }
      s.threads.emplace_back([&s, t] { s.worker_main(t); });
    }
    worker_threads_ = static_cast<int>(thread_count);
    if (!s.pin_cpus.empty()) {  // every worker has tried to pin itself before the constructor returns
      std::unique_lock<std::mutex> lock(s.mutex);
      s.pin_reported.wait(lock, [&] { return s.pin_reports == worker_threads_; });
      pinned_workers_ = s.pinned_workers;
    }
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.active_workers = static_cast<int>(s.threads.size());
    }
    s.shutdown();  // the destructor does not run when the constructor throws
    throw;
  }
}

BatchLoader::~BatchLoader() {
  if (state_) state_->shutdown();
}

std::optional<HostBatch> BatchLoader::next() {
  State& s = *state_;
  int64_t b = 0;
  int slot = 0;
  {
    std::unique_lock<std::mutex> lock(s.mutex);  // release() may run on another thread
    b = s.next_batch;
    if (b >= s.num_batches) return std::nullopt;
    slot = static_cast<int>(b % s.slots);
    const bool threaded = !s.threads.empty();
    auto throw_if_failed = [&] {
      if (s.failed_batch() > b) return;
      // Let the workers finish the positions before the failure: one of them may fail earlier still, and the
      // error must not depend on timing.
      if (threaded) s.batch_done.wait(lock, [&] { return s.active_workers == 0; });
      std::rethrow_exception(s.error);
    };
    throw_if_failed();
    if (s.slot_batch[static_cast<size_t>(slot)] != b)
      throw std::logic_error("BatchLoader::next: batch " + std::to_string(b - s.slots) +
                             " must be released before batch " + std::to_string(b) + " (all " +
                             std::to_string(s.slots) + " slots are held)");
    if (threaded) {
      s.batch_done.wait(lock, [&] {
        return s.slot_units_done[static_cast<size_t>(slot)] == s.units_per_batch || s.failed_batch() <= b;
      });
      throw_if_failed();
      s.next_batch = b + 1;
      s.batches_handed_out.store(b + 1);
    }
  }
  if (s.threads.empty()) {
    // No workers: decode the whole batch here, outside the lock.
    for (int64_t u = 0; u < s.units_per_batch; ++u) {
      if (!s.fill_unit(b * s.units_per_batch + u, s.consumer_scratch)) {
        std::lock_guard<std::mutex> lock(s.mutex);
        std::rethrow_exception(s.error);
      }
    }
    std::lock_guard<std::mutex> lock(s.mutex);
    s.next_batch = b + 1;
  }
  HostBatch batch;
  batch.images = s.pool.images(slot);
  batch.labels = s.pool.labels(slot);
  batch.size = s.batch_length(b);
  batch.index = b;
  batch.slot = slot;
  batch.encoded = s.pool.encoded(slot);
  batch.skip_bad = !s.options.replace_bad;
  return batch;
}

void BatchLoader::release(const HostBatch& batch) {
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    const bool valid = batch.slot >= 0 && batch.slot < s.slots && batch.index >= 0 && batch.index < s.next_batch &&
                       batch.index % s.slots == batch.slot &&
                       s.slot_batch[static_cast<size_t>(batch.slot)] == batch.index;
    if (!valid)
      throw std::logic_error("BatchLoader::release: batch " + std::to_string(batch.index) +
                             " is not held (never handed out or already released)");
    s.slot_batch[static_cast<size_t>(batch.slot)] = batch.index + s.slots;
    s.slot_units_done[static_cast<size_t>(batch.slot)] = 0;
  }
  s.slot_freed.notify_all();
}

}  // namespace rn50::data

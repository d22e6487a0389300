// data/loader.h: the batch loader: decode threads fill reusable host buffers, batches come out in order.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/host_memory.h"
#include "data/dataset.h"
#include "data/decode_budget.h"

namespace rn50::data {

// One batch in host memory: images as uint8 [size][image_size][image_size][3], labels as int64; or, from a pool
// of encoded batches, the compressed samples instead of the images.
struct HostBatch {
  uint8_t* images = nullptr;
  int64_t* labels = nullptr;
  int64_t size = 0;                  // images in this batch (the last validation batch may be short)
  int64_t index = 0;                 // batch number within the epoch
  int slot = 0;                      // buffer slot in the pool
  EncodedSample* encoded = nullptr;  // encoded pools: the samples' bytes, headers and crops (images: null, or the
                                     // pixel room of kEncodedWithPixels)
  // Positions whose sample cannot be used are labelled kSkippedLabel rather than filled from another sample
  // (LoaderOptions::replace_bad off): a device decoder does the same with what it cannot decode.
  bool skip_bad = false;
};

// What a pool's slots hold: decoded images (decode: cpu), compressed samples for the GPU (decode: gpu), or both
// (decode: gpu with a CPU share: the loader's threads decode some of the samples themselves, CpuDecodeShare).
enum class BatchContent { kPixels, kEncoded, kEncodedWithPixels };

// `slots` buffers of one batch each, allocated once and reused every epoch.
class BatchPool {
 public:
  BatchPool(int slots, int batch_size, int image_size, std::shared_ptr<HostAllocator> allocator,
            BatchContent content = BatchContent::kPixels);
  ~BatchPool();
  BatchPool(const BatchPool&) = delete;
  BatchPool& operator=(const BatchPool&) = delete;
  int slots() const { return static_cast<int>(images_.size()); }
  int batch_size() const { return batch_size_; }
  int image_size() const { return image_size_; }
  bool pinned() const { return allocator_->pinned(); }
  uint8_t* images(int slot) const { return images_[slot]; }  // null in kEncoded pools
  int64_t* labels(int slot) const { return labels_[slot]; }
  EncodedSample* encoded(int slot) { return encoded_.empty() ? nullptr : encoded_[slot].data(); }

 private:
  int batch_size_;
  int image_size_;
  std::shared_ptr<HostAllocator> allocator_;
  std::vector<uint8_t*> images_;
  std::vector<int64_t*> labels_;
  std::vector<std::vector<EncodedSample>> encoded_;
};

// Where each position of a batch takes its image (and label) from when some positions could not be decoded
// after the loader handed the batch out (GPU decoding): itself when it decoded, otherwise the next position
// that did, cyclically, as the loader replaces a bad sample by the next one in the order. Throws
// rn50::DecodeError when none decoded.
std::vector<int> replacement_sources(const std::vector<bool>& decoded);

// decode: gpu with a CPU share: which samples of a batch the loader's threads decode themselves into the pool's
// pixel room (EncodedSample::predecoded), the rest left compressed for the GPU. Where cores are too few to decode
// every image, both decoders work, and the GPU's decoding takes less of the step's SMs.
struct CpuDecodeShare {
  enum class Mode { kOff, kFixed, kAuto };
  Mode mode = Mode::kOff;
  double fraction = 0;  // kFixed: this share of each batch's positions, spread evenly over it (0 to 1)
  // kAuto: a thread decodes its next sample itself while at least `ready_batches` finished batches wait for the
  // consumer, and only reads it otherwise: the share settles where the threads just keep that far ahead. Every
  // thread switches at once (a cap on the threads decoding would leave the others reading nearly every sample).
  int ready_batches = 2;
};

// Whether position `i` of a batch is decoded on the CPU under `share` while `ready` finished batches wait: kFixed
// takes i when floor((i + 1) * fraction) passes an integer.
bool decode_on_cpu(const CpuDecodeShare& share, int64_t i, int64_t ready);

struct LoaderOptions {
  int batch_size = 256;
  int workers = 0;  // decode threads; 0 decodes on the calling thread inside next()
  bool drop_last = true;
  bool strict = false;        // a bad sample is fatal instead of being replaced
  int max_replacements = 32;  // consecutive bad samples before giving up, even when not strict
  // Training replaces a bad sample by the next one in the order, so that every batch is full for the fixed-shape
  // step. Validation (false) leaves its position empty, labelled kSkippedLabel: its figures then cover exactly the
  // images that decode, not a neighbour counted twice.
  bool replace_bad = true;
  // >= 0: worker k runs only on the usable CPU (core/affinity.h) at index (pin_first_cpu + k) mod their count;
  // -1: the workers are not pinned.
  int pin_first_cpu = -1;
  // The decoded bytes the decode threads may hold at once (data/decode_budget.h), shared with every loader given the
  // same budget (a run's training and validation loaders decode at the same time at an epoch's end). Null: no bound.
  std::shared_ptr<DecodeBudget> decode_budget;
  // Needs a kEncodedWithPixels pool unless kOff. A sample libjpeg fails is left compressed for the device's routes,
  // which report it if nothing decodes it: the same bad-sample counts as without the share.
  CpuDecodeShare cpu_share;
};

// Called once for every bad sample that is skipped (its description and the reason), from whichever thread met it;
// never in strict mode, where the first bad sample is the loader's error.
using BadSampleHandler = std::function<void(const std::string& what, const std::string& reason)>;

// Loads one epoch. Batch b goes to pool slot b % slots; workers fill at most `slots` batches ahead of
// the consumer. A bad sample is reported, counted and replaced by the next sample in the order, unless
// strict, in which case next() throws rn50::DecodeError naming the file. With an encoded pool the workers
// only read files and headers (ImageDataset::load_encoded); what fails there is replaced the same way. With a
// CPU share they also decode some samples (ImageDataset::decode_encoded).
class BatchLoader {
 public:
  BatchLoader(const ImageDataset& dataset, std::vector<size_t> order, uint64_t epoch, const LoaderOptions& options,
              BatchPool& pool, BadSampleHandler on_bad_sample);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  int64_t num_batches() const { return num_batches_; }
  // The next batch in order, or nullopt after the last. Blocks until it is ready; rethrows a worker's error.
  std::optional<HostBatch> next();
  // Hands a batch's buffer back, once its contents are no longer needed (after the device copy finished).
  void release(const HostBatch& batch);
  int64_t bad_samples() const { return bad_samples_.load(); }
  // Samples the CPU share decoded so far (EncodedSample::predecoded).
  int64_t cpu_decoded() const { return cpu_decoded_.load(); }
  // Decode threads started, and how many of them were pinned (LoaderOptions::pin_first_cpu).
  int worker_threads() const { return worker_threads_; }
  int pinned_workers() const { return pinned_workers_; }

 private:
  // (implementation-defined members)
  struct State;
  std::unique_ptr<State> state_;
  int64_t num_batches_ = 0;
  int worker_threads_ = 0;
  int pinned_workers_ = 0;
  std::atomic<int64_t> bad_samples_{0};
  std::atomic<int64_t> cpu_decoded_{0};
};

}  // namespace rn50::data

// input/source.h: InputSource, what the epoch loop reads each step's batch from, its options, and
// create_input_source, which picks CPU decoding, GPU decoding or synthetic batches. The loop never knows which.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "data/loader.h"

namespace rn50::input {

// Which source makes the batches: the ImageNet folder decoded on the CPU or on the GPU, or synthetic batches.
enum class SourceKind { kCpuDecode, kGpuDecode, kSynthetic };

// What the sources read and how (the keys of the same names; docs/configuration.md).
struct InputOptions {
  SourceKind kind = SourceKind::kCpuDecode;
  std::string data_root;  // holding train/ and val/
  int batch_size = 256;   // per rank
  int image_size = 224;
  int val_resize = 256;
  int epochs = 1;         // of the run: GPU decoding starts the next epoch's batches during the last one's steps
  int64_t max_steps = 0;  // per epoch; 0: the whole epoch
  int64_t seed = 0;       // the shuffle and each sample's crop and flip
  bool validate = true;   // open val/ too
  // The loader (decoding sources)
  int workers = 0;   // decode threads; 0: on the training thread
  int prefetch = 4;  // batches decoded ahead
  bool pin_memory = true;
  bool pin_workers = false;
  bool strict_data = false;
  data::SampleLimits limits;
  // The bytes of decoded images the decode threads may hold at once, one budget for the training and validation
  // loaders (data/decode_budget.h), and where the figure came from, for the start-up table.
  uint64_t decode_budget_bytes = uint64_t{4} << 30;
  std::string decode_budget_origin;
  // GPU decoding
  bool decode_yuv = false;
  bool decode_ahead = true;
  int decode_ahead_batches = 3;
  int gpu_decoders = 1;  // decoders taking the batches in turn (DecoderGroup)
  // Which images the decode threads decode themselves (kOff: none, they only read files).
  data::CpuDecodeShare decode_cpu_share;
  // Synthetic batches
  int64_t synthetic_images = 25600;  // images per epoch, over all ranks
};

// Named counters for an epoch record; nullopt is written as null ("unavailable"), never 0.
using NamedValues = std::vector<std::pair<std::string, std::optional<double>>>;

// What a source reports for an epoch of training or for a validation.
struct InputCounts {
  double wait_s = 0;        // host time blocked on the data: the loader, a copy slot, a decode
  int64_t bad_samples = 0;  // images skipped (counted and replaced) because they could not be read or decoded
  NamedValues extra;        // the source's own counters, under its own names
};

// Where the data comes from and how it is split: the same on every rank of a data-parallel run.
struct DatasetInfo {
  std::vector<std::string> classes;
  int64_t train_images = 0;     // in all, before the split over ranks
  int64_t val_images = 0;       // 0: no validation split
  int64_t steps_per_epoch = 0;  // per rank
};

// Who reads and what the step's input looks like.
struct InputContext {
  c10::Device device = c10::kCPU;
  int rank = 0, world = 1, local_rank = 0;  // data parallel: each rank takes 1/world of every epoch
  at::ScalarType image_dtype = at::kFloat;  // the step's input tensor: [batch, channels, size, size] of this dtype
  bool channels_last = false;
  // The input's channels: the image's 3, or more for a model whose stem takes them (models::input_channels), the
  // ones past 3 written as zeros by every source, so that the model need not copy the batch to pad it.
  int64_t image_channels = 3;
};

// Called with each validation batch, on the device, in the step's input dtype and layout.
using EvalBatch = std::function<void(const at::Tensor& images, const at::Tensor& labels)>;

class InputSource {
 public:
  virtual ~InputSource() = default;
  const DatasetInfo& info() const { return info_; }
  // Rows for the start-up table: how batches are made and reach the device.
  virtual std::vector<std::pair<std::string, std::string>> describe() const = 0;

  // Starts training epoch `epoch` (0-based) of info().steps_per_epoch steps, at step `first_step` of it (a run resumed
  // from a checkpoint written mid-epoch): the batches are those the whole epoch would have had from that step on.
  virtual void begin_epoch(int64_t epoch, int64_t first_step = 0) = 0;
  // Writes the next step's batch into `images` and `labels` in place: under a CUDA graph their addresses are baked
  // into the captured step.
  virtual void fill(at::Tensor& images, at::Tensor& labels) = 0;
  // Called once the step that reads the batch is queued: work for later steps (batches decoded ahead, the next
  // epoch's first batches).
  virtual void after_step() {}
  // Ends the epoch once its last step is queued: waits for the work still held and returns its counters.
  virtual InputCounts end_epoch() = 0;

  // This rank's share of the validation split, batch by batch (the last may be short); needs info().val_images > 0.
  virtual InputCounts validate(const EvalBatch& eval) = 0;

  // After an exception out of an epoch: stop using the batches still held, without handing them back (their loader
  // goes as the exception unwinds). The source is not used again.
  virtual void abandon() {}

 protected:
  DatasetInfo info_;
};

// Opens the data the options name (the ImageNet folder under data_root, or synthetic batches) for this rank.
// Throws ConfigError / DataError before training when the data or the device cannot serve them.
std::unique_ptr<InputSource> create_input_source(const InputOptions& options, const InputContext& context);

// The device checks of create_input_source alone (decode: gpu needs a CUDA device and nvJPEG), for a run to make
// before anything else, data parallel's rendezvous included.
void check_input_device(SourceKind kind, const c10::Device& device);

}  // namespace rn50::input

// input/gpu_decode/decoder_group.h: DecoderGroup, GPU decoders that take a stream of batches in turn (config key
// gpu_decoders), each with its own thread of nvJPEG calls. In training each batched hardware call lasts until the
// step beside it ends (docs/gpu-decoding.md): one decoder then delivers one batch a step and the device waits between
// steps; with two, a second call runs while the first waits. Header-only over the decoder type, so that
// tests/input/gpu_decode/test_decoder_group.cpp runs it with a fake decoder on any machine.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace rn50::input {

// Batch b goes to decoder b % N in submit order, and finish_into takes the batches back in that order, so the
// caller sees one decoder. Decoder: GpuJpegDecoder's interface (submit, finish_into, finished_batches, decode_into,
// drain, abandon, take_counts, describe). Each decoder paces its finish_into by its own previous one, N batches back,
// so the host may run up to N + 1 steps ahead of the device (one decoder: two).
template <class Decoder>
class DecoderGroup {
 public:
  explicit DecoderGroup(std::vector<std::unique_ptr<Decoder>> decoders) : decoders_(std::move(decoders)) {
    if (decoders_.empty()) throw std::invalid_argument("DecoderGroup: no decoders");
  }

  int size() const { return static_cast<int>(decoders_.size()); }

  template <class Batch, class OnBad, class Release>
  void submit(const Batch& batch, const OnBad& on_bad, const Release& release) {
    next(submitted_).submit(batch, on_bad, release);  // a throw leaves the count: nothing was taken
    ++submitted_;
  }

  // The oldest submitted batch's input. A batch whose decode threw is taken all the same (its decoder goes on
  // with its next batch), so the next call asks the next decoder; a throw that leaves the batch with its decoder
  // (bad tensors, a stopped decode thread) keeps the turn, so that the next call asks for the same batch.
  template <class Images, class Labels>
  void finish_into(Images& images, Labels& labels) {
    if (finished_ == submitted_) throw std::logic_error("DecoderGroup: finish_into without a submitted batch");
    Decoder& decoder = next(finished_);
    const uint64_t taken_before = decoder.finished_batches();
    try {
      decoder.finish_into(images, labels);
    } catch (...) {
      if (decoder.finished_batches() != taken_before) ++finished_;
      throw;
    }
    ++finished_;
  }

  // submit, then finish_into, of one batch: only with no batch in flight (else finish_into would make an older one).
  template <class Batch, class Images, class Labels, class OnBad, class Release>
  void decode_into(const Batch& batch, Images& images, Labels& labels, const OnBad& on_bad, const Release& release) {
    if (finished_ != submitted_) throw std::logic_error("DecoderGroup: decode_into with batches in flight");
    Decoder& decoder = next(submitted_);
    ++submitted_;
    ++finished_;
    decoder.decode_into(batch, images, labels, on_bad, release);
  }

  void drain() {
    for (auto& d : decoders_) d->drain();
  }

  // Every decoder forgets what it holds; the turn starts again at the first.
  void abandon() {
    for (auto& d : decoders_) d->abandon();
    submitted_ = finished_ = 0;
  }

  template <class Counts = decltype(std::declval<Decoder&>().take_counts())>
  Counts take_counts() {
    Counts all = decoders_.front()->take_counts();
    for (size_t i = 1; i < decoders_.size(); ++i) all.add(decoders_[i]->take_counts());
    return all;
  }

  std::string describe() const {
    const std::string first = decoders_.front()->describe();
    return decoders_.size() == 1 ? first
                                 : first + "; " + std::to_string(decoders_.size()) +
                                       " decoders taking batches in turn, each with its own thread";
  }

 private:
  Decoder& next(uint64_t batch) { return *decoders_[static_cast<size_t>(batch % decoders_.size())]; }

  std::vector<std::unique_ptr<Decoder>> decoders_;
  uint64_t submitted_ = 0, finished_ = 0;  // batches handed to a decoder, and taken back
};

}  // namespace rn50::input

// ops/side_stream.h: SideStream, work off a layer's critical path (its weight gradients) on a second CUDA stream
// beside the current one, forked and joined by events, so that a CUDA graph captures it as parallel branches.
#pragma once

#include <memory>
#include <utility>

namespace rn50::ops {

// Each run(f) calls f with a side stream of the device current, after everything queued so far on the current
// stream (an event the side stream waits on); join() makes the current stream wait for all the side stream's work.
// The destructor joins too, so an exception cannot leave the current stream ahead of work it may depend on.
// Tensors that f allocates come from the side stream's share of the caching allocator: safe to free on the current
// stream after the join, since every run waits on the current stream first. Disabled (or in a CPU build) f runs on
// the current stream and join() does nothing. One side stream per device and thread, rn50's own (not LibTorch's pool,
// whose streams other threads may hold while this one captures a graph).
class SideStream {
 public:
  SideStream(int device, bool enabled);
  ~SideStream();
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  template <class F>
  auto run(F&& f) {
    if (!state_) return std::forward<F>(f)();
    enter();
    struct Leave {
      SideStream* s;
      ~Leave() { s->leave(); }
    } leave_on_exit{this};
    return std::forward<F>(f)();
  }

  void join();

 private:
  void enter();
  void leave();

  struct State;
  std::unique_ptr<State> state_;  // null when disabled
};

}  // namespace rn50::ops

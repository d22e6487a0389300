// ops/side_stream_none.cpp: SideStream in CPU-only builds: everything runs in order, nothing to join.
#include "ops/side_stream.h"

namespace rn50::ops {

struct SideStream::State {};

SideStream::SideStream(int, bool) {}
SideStream::~SideStream() = default;
void SideStream::enter() {}
void SideStream::leave() {}
void SideStream::join() {}

}  // namespace rn50::ops

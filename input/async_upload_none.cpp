// input/async_upload_none.cpp: the CPU-only build's AsyncUploader, never constructed (pinned memory needs CUDA).
#include <stdexcept>

#include "input/async_upload.h"

namespace rn50::input {
namespace {
[[noreturn]] void no_cuda() { throw std::logic_error("AsyncUploader: this rn50 was built without CUDA"); }
}  // namespace

struct AsyncUploader::Impl {};
AsyncUploader::AsyncUploader(int, int, int, int) { no_cuda(); }
AsyncUploader::~AsyncUploader() = default;
std::pair<at::Tensor, at::Tensor> AsyncUploader::upload(const data::HostBatch&,
                                                        const std::function<void(const data::HostBatch&)>&) {
  no_cuda();
}
void AsyncUploader::drain() {}
double AsyncUploader::take_copy_seconds() { return 0; }

}  // namespace rn50::input

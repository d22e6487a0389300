// data/decode_budget.cpp: DecodeBudget, a counting budget taken in turn, and the process's default budget.
#include "data/decode_budget.h"

#include <utility>

#include "core/limits.h"

namespace rn50::data {

DecodeBudget::DecodeBudget(uint64_t bytes) : capacity_(bytes) {}

DecodeBudget::Hold::Hold(Hold&& other) noexcept
    : budget_(std::exchange(other.budget_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DecodeBudget::Hold& DecodeBudget::Hold::operator=(Hold&& other) noexcept {
  if (this != &other) {
    if (budget_) budget_->release(bytes_);
    budget_ = std::exchange(other.budget_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DecodeBudget::Hold::~Hold() {
  if (budget_) budget_->release(bytes_);
}

DecodeBudget::Hold DecodeBudget::acquire(uint64_t bytes) {
  if (bytes == 0) return Hold();
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t ticket = next_ticket_++;
  changed_.wait(lock, [&] {
    return serving_ == ticket && (in_flight_ == 0 || (in_flight_ <= capacity_ && bytes <= capacity_ - in_flight_));
  });
  ++serving_;
  in_flight_ += bytes;
  if (in_flight_ > peak_) peak_ = in_flight_;
  lock.unlock();
  changed_.notify_all();  // the next in turn may fit too
  return Hold(this, bytes);
}

void DecodeBudget::release(uint64_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    in_flight_ -= bytes;
  }
  changed_.notify_all();
}

uint64_t DecodeBudget::in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_flight_;
}

uint64_t DecodeBudget::peak_in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_;
}

uint64_t default_decode_budget_bytes() {
  const CgroupLimits limits = read_cgroup_limits();
  const uint64_t memory = limits.memory_bytes ? *limits.memory_bytes : physical_memory_bytes();
  return memory > 0 ? memory / 4 : uint64_t{4} << 30;  // 4 GiB where the memory is unknown
}

std::shared_ptr<DecodeBudget> process_decode_budget() {
  static const std::shared_ptr<DecodeBudget> budget = std::make_shared<DecodeBudget>(default_decode_budget_bytes());
  return budget;
}

}  // namespace rn50::data

// data/decode_budget.cpp: DecodeBudget, a counting budget taken in turn, and the size of a process's budget.
#include "data/decode_budget.h"

#include <algorithm>
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

uint64_t DecodeBudget::waiting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return next_ticket_ - serving_;
}

uint64_t DecodeBudget::peak_in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_;
}

ProcessMemory process_memory() {
  const CgroupLimits limits = read_cgroup_limits();
  const uint64_t machine = physical_memory_bytes();
  // A limit at or above the machine's memory is no limit (cgroup v1 often holds such a number).
  if (limits.memory_bytes && (machine == 0 || *limits.memory_bytes < machine)) return {*limits.memory_bytes, true};
  return {machine, false};
}

uint64_t decode_budget_bytes(uint64_t configured_bytes, uint64_t memory_bytes, int local_processes) {
  if (configured_bytes > 0) return configured_bytes;
  const uint64_t memory = memory_bytes > 0 ? memory_bytes : uint64_t{16} << 30;
  return memory / 4 / static_cast<uint64_t>(std::max(1, local_processes));
}

}  // namespace rn50::data

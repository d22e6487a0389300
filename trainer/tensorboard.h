// trainer/tensorboard.h: TensorBoard's event files written by rn50 itself: TFRecord framing with masked CRC32C, the
// few protobuf fields of an Event holding one scalar, and the sink that turns the metrics records into scalars
// (torch-free; no protobuf library: the fields are encoded by hand).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainer/metrics.h"

namespace rn50::trainer::tensorboard {

// CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), as TFRecord uses; `crc` continues an earlier call's.
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);
// TFRecord's masked form of it: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t size);

// One TFRecord: the data's length (uint64, little-endian), the masked CRC of those 8 bytes, the data, the masked
// CRC of the data.
std::string frame_record(const std::string& data);

// The serialized Events (event.proto): the file's first, Event{wall_time, file_version: "brain.Event:2"}; and one
// scalar point, Event{wall_time, step, summary: Summary{value: [Value{tag, simple_value}]}}.
std::string file_version_event(double wall_time);
std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value);

struct Scalar {
  std::string tag;
  double value = 0;
};
// The scalars of a record, null values left out. Step records: "train/loss", "train/lr", "train/images_per_s" and
// "train/<metric>" for each utilisation mean; epoch records: "epoch/<field>" for each number of the record (top-1
// and top-5 in percent, as PyTorch's and timm's scripts print them).
std::vector<Scalar> scalars_of(const StepRecord& record);
std::vector<Scalar> scalars_of(const EpochRecord& record);

// What an event file holds, read back: where a resumed run cuts the interrupted run's files, and the tests.
struct ReadEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;  // the first event's
  std::string tag;           // a scalar event's (the first value's)
  float value = 0;
  std::string record;  // the whole framed record, as it was in the file
};
struct ReadEvents {
  std::vector<ReadEvent> events;
  size_t torn_bytes = 0;  // past the last whole record: cut short by a kill or a full disk, or a bad CRC
};
ReadEvents read_event_file(const std::string& path);

// The scalar curves of a run: out_dir/events.out.tfevents.<unix time>.<host>, one record per scalar point, each
// record's events in one write (a kill tears at most the last record). Opening it puts the folder's earlier event
// files in line with the metrics file: a fresh run removes them (TensorBoard would draw both runs over each other;
// their figures stay in metrics.jsonl), a resumed one drops their points past the resume point (train/ tags past its
// step, epoch/ tags past its epoch), so that the resumed run's points are not drawn twice.
class EventLog final : public RecordSink {
 public:
  EventLog(const std::string& out_dir, const std::optional<ResumePoint>& resume);
  ~EventLog() override;
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;
  std::string name() const override { return "TensorBoard event file " + path_; }
  void write(const StepRecord& record) override;
  void write(const EpochRecord& record) override;
  const std::string& path() const { return path_; }
  // What opening it did to earlier files ("" when nothing), for the log.
  const std::string& repaired() const { return repaired_; }

 private:
  void write_scalars(int64_t step, const std::vector<Scalar>& scalars);
  std::string path_;
  std::string repaired_;
  int fd_ = -1;
};

// Whether a file name is an event file's, as TensorBoard tells them ("tfevents" in the name).
bool is_event_file_name(const std::string& file_name);

}  // namespace rn50::trainer::tensorboard

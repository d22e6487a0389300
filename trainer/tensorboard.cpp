// trainer/tensorboard.cpp: CRC-32C, TFRecord framing, the Event fields by hand, the event file and its repair.
#include "trainer/tensorboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "core/files.h"
#include "core/log.h"

namespace rn50::trainer::tensorboard {
namespace {

constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

// The protobuf wire format's pieces (https://protobuf.dev/programming-guides/encoding/): a key is the field number
// shifted left by 3 with the wire type (0 varint, 1 fixed 64 bits, 2 length-delimited, 5 fixed 32 bits).
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_little_endian(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | wire_type);
}

void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

void put_double(std::string& out, int field, double v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, 1);
  put_little_endian(out, bits, 8);
}

void put_float(std::string& out, int field, float v) {
  uint32_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, 5);
  put_little_endian(out, bits, 4);
}

// Event's fields (tensorflow/core/util/event.proto), Summary's and Summary.Value's (summary.proto).
constexpr int kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5;
constexpr int kSummaryValue = 1;
constexpr int kValueTag = 1, kValueSimpleValue = 2;

std::string event_head(double wall_time, int64_t step) {
  std::string event;
  put_double(event, kEventWallTime, wall_time);
  if (step != 0) {  // proto3 leaves a default value out
    put_key(event, kEventStep, 0);
    put_varint(event, static_cast<uint64_t>(step));
  }
  return event;
}

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// A reader of the wire format over one message's bytes, for the events rn50 wrote.
class Fields {
 public:
  Fields(const char* data, size_t size) : p_(reinterpret_cast<const uint8_t*>(data)), end_(p_ + size) {}
  bool done() const { return p_ >= end_; }
  // The next field's number and wire type; false where the bytes are not a field.
  bool next(int& field, int& wire_type) {
    uint64_t key = 0;
    if (!varint(key)) return false;
    field = static_cast<int>(key >> 3);
    wire_type = static_cast<int>(key & 7);
    return true;
  }
  bool varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64 && p_ < end_; shift += 7) {
      const uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  bool fixed(uint64_t& v, int bytes) {
    if (end_ - p_ < bytes) return false;
    v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(*p_++) << (8 * i);
    return true;
  }
  bool bytes(const char*& data, size_t& size) {
    uint64_t n = 0;
    if (!varint(n) || n > static_cast<uint64_t>(end_ - p_)) return false;
    data = reinterpret_cast<const char*>(p_);
    size = n;
    p_ += n;
    return true;
  }
  // Skips a field of `wire_type`; false on a type this reader does not know.
  bool skip(int wire_type) {
    uint64_t v = 0;
    const char* d = nullptr;
    size_t n = 0;
    switch (wire_type) {
      case 0:
        return varint(v);
      case 1:
        return fixed(v, 8);
      case 2:
        return bytes(d, n);
      case 5:
        return fixed(v, 4);
      default:
        return false;
    }
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// Summary.Value's tag and simple_value (the first value of the summary).
bool parse_value(const char* data, size_t size, ReadEvent& e) {
  Fields f(data, size);
  int field = 0, type = 0;
  while (!f.done()) {
    if (!f.next(field, type)) return false;
    if (field == kValueTag && type == 2) {
      const char* d = nullptr;
      size_t n = 0;
      if (!f.bytes(d, n)) return false;
      e.tag.assign(d, n);
    } else if (field == kValueSimpleValue && type == 5) {
      uint64_t bits = 0;
      if (!f.fixed(bits, 4)) return false;
      const auto b32 = static_cast<uint32_t>(bits);
      std::memcpy(&e.value, &b32, sizeof e.value);
    } else if (!f.skip(type)) {
      return false;
    }
  }
  return true;
}

bool parse_event(const char* data, size_t size, ReadEvent& e) {
  Fields f(data, size);
  int field = 0, type = 0;
  while (!f.done()) {
    if (!f.next(field, type)) return false;
    uint64_t v = 0;
    const char* d = nullptr;
    size_t n = 0;
    if (field == kEventWallTime && type == 1) {
      if (!f.fixed(v, 8)) return false;
      std::memcpy(&e.wall_time, &v, sizeof e.wall_time);
    } else if (field == kEventStep && type == 0) {
      if (!f.varint(v)) return false;
      e.step = static_cast<int64_t>(v);
    } else if (field == kEventFileVersion && type == 2) {
      if (!f.bytes(d, n)) return false;
      e.file_version.assign(d, n);
    } else if (field == kEventSummary && type == 2) {
      if (!f.bytes(d, n)) return false;
      Fields summary(d, n);
      int sfield = 0, stype = 0;
      while (!summary.done() && e.tag.empty()) {
        if (!summary.next(sfield, stype)) return false;
        const char* vd = nullptr;
        size_t vn = 0;
        if (sfield == kSummaryValue && stype == 2) {
          if (!summary.bytes(vd, vn) || !parse_value(vd, vn, e)) return false;
        } else if (!summary.skip(stype)) {
          return false;
        }
      }
    } else if (!f.skip(type)) {
      return false;
    }
  }
  return true;
}

uint32_t read_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

// Whether a resumed run keeps an event of the interrupted run: as the metrics file keeps its records (train/ tags
// by global step, epoch/ tags by epoch); the file's version event always.
bool kept(const ReadEvent& e, const ResumePoint& resume) {
  if (!e.file_version.empty()) return true;
  if (e.tag.rfind("epoch/", 0) == 0) return e.step <= resume.epoch;
  return e.step <= resume.step;
}

// Puts the folder's earlier event files in line with the metrics file (see EventLog); returns what it did.
std::string repair_earlier_files(const std::string& out_dir, const std::optional<ResumePoint>& resume) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(out_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file(ec) || name.find("tfevents") == std::string::npos) continue;
    if (is_event_file_name(name)) {
      files.push_back(entry.path());
    } else {
      fs::remove(entry.path(), ec);  // the temporary of a repair that a kill interrupted: the file itself is whole
    }
  }
  size_t removed = 0, dropped = 0, torn = 0;
  for (const auto& file : files) {
    if (!resume) {
      if (fs::remove(file, ec)) ++removed;
      continue;
    }
    const ReadEvents read = read_event_file(file.string());
    std::string keep;
    size_t scalars_kept = 0, dropped_here = 0;
    for (const auto& e : read.events) {
      if (!kept(e, *resume)) {
        ++dropped_here;
        continue;
      }
      if (e.file_version.empty()) ++scalars_kept;
      keep += e.record;
    }
    if (dropped_here == 0 && read.torn_bytes == 0) continue;
    dropped += dropped_here;
    torn += read.torn_bytes;
    if (scalars_kept == 0) {
      if (fs::remove(file, ec)) ++removed;
      continue;
    }
    files::write_atomically(file.string(), keep.data(), keep.size());
  }
  std::string what;
  if (dropped) what += strprintf(" dropped %zu points past the resumed checkpoint;", dropped);
  if (removed) {
    what +=
        strprintf(" removed %zu event file%s %s;", removed, removed == 1 ? "" : "s",
                  resume ? "left with no point before it" : "of an earlier run (its figures stay in metrics.jsonl)");
  }
  if (torn) what += strprintf(" cut %zu torn bytes;", torn);
  if (what.empty()) return "";
  what.pop_back();
  return "TensorBoard files in " + out_dir + ":" + what;
}

std::string host_name() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0 || name[0] == '\0') return "localhost";
  std::string host = name.data();
  for (char& c : host) {
    if (c == '/') c = '_';
  }
  return host;
}

void add(std::vector<Scalar>& out, const std::string& tag, const std::optional<double>& v) {
  if (v) out.push_back({tag, *v});
}

}  // namespace

uint32_t crc32c(const void* data, size_t size, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = kCrc32cTable[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string frame_record(const std::string& data) {
  std::string out;
  put_little_endian(out, data.size(), 8);
  put_little_endian(out, masked_crc32c(out.data(), 8), 4);
  out += data;
  put_little_endian(out, masked_crc32c(data.data(), data.size()), 4);
  return out;
}

std::string file_version_event(double wall_time) {
  std::string event = event_head(wall_time, 0);
  put_bytes(event, kEventFileVersion, "brain.Event:2");
  return event;
}

std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
  std::string v;
  put_bytes(v, kValueTag, tag);
  put_float(v, kValueSimpleValue, value);
  std::string summary;
  put_bytes(summary, kSummaryValue, v);
  std::string event = event_head(wall_time, step);
  put_bytes(event, kEventSummary, summary);
  return event;
}

std::vector<Scalar> scalars_of(const StepRecord& r) {
  std::vector<Scalar> out = {{"train/loss", r.loss}, {"train/lr", r.lr}, {"train/images_per_s", r.images_per_s}};
  for (const auto& [name, value] : r.extra) add(out, "train/" + name, value);
  return out;
}

std::vector<Scalar> scalars_of(const EpochRecord& r) {
  std::vector<Scalar> out = {{"epoch/train_loss", r.train_loss},     {"epoch/lr", r.lr},
                             {"epoch/images_per_s", r.images_per_s}, {"epoch/wall_s", r.wall_s},
                             {"epoch/data_wait_s", r.data_wait_s},   {"epoch/compute_s", r.compute_s}};
  add(out, "epoch/val_loss", r.val_loss);
  add(out, "epoch/top1", r.top1 ? std::optional<double>(100 * *r.top1) : std::nullopt);
  add(out, "epoch/top5", r.top5 ? std::optional<double>(100 * *r.top5) : std::nullopt);
  add(out, "epoch/peak_gpu_mem_gib", r.peak_gpu_mem_gib);
  out.push_back({"epoch/peak_host_rss_gib", r.peak_host_rss_gib});
  out.push_back({"epoch/bad_samples", static_cast<double>(r.bad_samples)});
  for (const auto& [name, value] : r.extra) add(out, "epoch/" + name, value);
  return out;
}

ReadEvents read_event_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ReadEvents out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t left = text.size() - at;
    if (left < 12 || read_u32(text.data() + at + 8) != masked_crc32c(text.data() + at, 8)) break;
    uint64_t length = 0;
    for (int i = 0; i < 8; ++i) length |= static_cast<uint64_t>(static_cast<uint8_t>(text[at + i])) << (8 * i);
    if (length > left - 16) break;
    const char* data = text.data() + at + 12;
    if (read_u32(data + length) != masked_crc32c(data, length)) break;
    ReadEvent e;
    if (!parse_event(data, length, e)) break;
    e.record = text.substr(at, 16 + length);
    out.events.push_back(std::move(e));
    at += 16 + length;
  }
  out.torn_bytes = text.size() - at;
  return out;
}

bool is_event_file_name(const std::string& file_name) {
  const std::string tmp = files::temporary_path("");
  const bool temporary =
      file_name.size() >= tmp.size() && file_name.compare(file_name.size() - tmp.size(), tmp.size(), tmp) == 0;
  return file_name.find("tfevents") != std::string::npos && !temporary;
}

EventLog::EventLog(const std::string& out_dir, const std::optional<ResumePoint>& resume)
    : repaired_(repair_earlier_files(out_dir, resume)) {
  const double now = unix_now();
  const std::string base =
      out_dir + "/events.out.tfevents." + std::to_string(static_cast<int64_t>(now)) + "." + host_name();
  // A resume within the same second as the interrupted run's start: another name, never its file.
  for (int n = 0; fd_ < 0; ++n) {
    path_ = n == 0 ? base : base + "." + std::to_string(n);
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0 && (errno != EEXIST || n >= 100)) {
      throw std::runtime_error("cannot create " + path_ + ": " + files::errno_text(errno));
    }
  }
  const std::string version = frame_record(file_version_event(now));
  if (::write(fd_, version.data(), version.size()) != static_cast<ssize_t>(version.size())) {
    const int err = errno;
    ::close(fd_);
    throw std::runtime_error("cannot write " + path_ + ": " + files::errno_text(err));
  }
}

EventLog::~EventLog() { ::close(fd_); }

void EventLog::write(const StepRecord& r) { write_scalars(r.step, scalars_of(r)); }

void EventLog::write(const EpochRecord& r) { write_scalars(r.epoch, scalars_of(r)); }

void EventLog::write_scalars(int64_t step, const std::vector<Scalar>& scalars) {
  const double now = unix_now();
  std::string records;
  for (const auto& s : scalars) records += frame_record(scalar_event(now, step, s.tag, static_cast<float>(s.value)));
  ssize_t n = -1;
  do {
    n = ::write(fd_, records.data(), records.size());
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(records.size())) {
    throw std::runtime_error(n < 0 ? files::errno_text(errno) : "short write (disk full?)");
  }
}

}  // namespace rn50::trainer::tensorboard

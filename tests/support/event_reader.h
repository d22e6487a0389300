// tests/support/event_reader.h: a reader of TensorBoard event files written apart from rn50's (trainer/tensorboard.h),
// to check the files against the format itself: TFRecord framing, masked CRC-32C computed bit by bit, and the
// protobuf fields of Event, Summary and Summary.Value decoded by a generic wire-format parser.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

namespace rn50::testing {

// CRC-32C bit by bit (no table), from the polynomial's definition.
inline uint32_t crc32c_bitwise(const std::string& data) {
  uint32_t crc = 0xffffffffu;
  for (const unsigned char byte : data) {
    crc ^= byte;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
  }
  return crc ^ 0xffffffffu;
}

inline uint32_t masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

inline uint64_t little_endian(const std::string& bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < bytes.size(); ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  return v;
}

// One protobuf message's fields by number: each occurrence's raw value (varints and fixed widths as integers, the
// length-delimited ones as bytes). `error` is set where the bytes are not a message.
struct Message {
  std::map<int, std::vector<uint64_t>> numbers;
  std::map<int, std::vector<std::string>> bytes;
  std::map<int, int> wire_types;
  std::string error;
};

inline Message parse_message(const std::string& data) {
  Message m;
  size_t at = 0;
  auto fail = [&](const std::string& why) {
    m.error = why;
    return m;
  };
  auto varint = [&](uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at >= data.size()) return false;
      const auto b = static_cast<unsigned char>(data[at++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  };
  while (at < data.size()) {
    uint64_t key = 0, v = 0;
    if (!varint(key)) return fail("bad key");
    const int field = static_cast<int>(key >> 3), type = static_cast<int>(key & 7);
    m.wire_types[field] = type;
    if (type == 0) {
      if (!varint(v)) return fail("bad varint");
      m.numbers[field].push_back(v);
    } else if (type == 1 || type == 5) {
      const size_t n = type == 1 ? 8 : 4;
      if (at + n > data.size()) return fail("short fixed field");
      m.numbers[field].push_back(little_endian(data.substr(at, n)));
      at += n;
    } else if (type == 2) {
      if (!varint(v) || v > data.size() - at) return fail("bad length");
      m.bytes[field].push_back(data.substr(at, v));
      at += v;
    } else {
      return fail("wire type " + std::to_string(type));
    }
  }
  return m;
}

struct EventPoint {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::vector<std::pair<std::string, float>> values;  // Summary.Value's tag and simple_value
};

struct EventFileRead {
  std::vector<EventPoint> events;
  std::string error;  // the first thing that breaks the format; "" when the whole file is well formed
};

inline EventFileRead read_events(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EventFileRead out;
  auto fail = [&](const std::string& why) {
    out.error = why;
    return out;
  };
  size_t at = 0;
  while (at < file.size()) {
    if (file.size() - at < 16) return fail("a record shorter than its header and footer");
    const std::string length_bytes = file.substr(at, 8);
    if (little_endian(file.substr(at + 8, 4)) != masked(crc32c_bitwise(length_bytes)))
      return fail("bad length CRC at byte " + std::to_string(at));
    const uint64_t length = little_endian(length_bytes);
    if (length > file.size() - at - 16) return fail("a record past the end of the file");
    const std::string data = file.substr(at + 12, length);
    if (little_endian(file.substr(at + 12 + length, 4)) != masked(crc32c_bitwise(data)))
      return fail("bad data CRC at byte " + std::to_string(at));
    at += 16 + length;
    const Message event = parse_message(data);
    if (!event.error.empty()) return fail("Event: " + event.error);
    EventPoint p;
    if (event.numbers.count(1)) {
      if (event.wire_types.at(1) != 1) return fail("wall_time is not a double");
      const uint64_t bits = event.numbers.at(1).back();
      std::memcpy(&p.wall_time, &bits, sizeof p.wall_time);
    }
    if (event.numbers.count(2)) p.step = static_cast<int64_t>(event.numbers.at(2).back());
    if (event.bytes.count(3)) p.file_version = event.bytes.at(3).back();
    if (event.bytes.count(5)) {
      const Message summary = parse_message(event.bytes.at(5).back());
      if (!summary.error.empty()) return fail("Summary: " + summary.error);
      if (!summary.bytes.count(1)) return fail("a Summary without a value");
      for (const auto& v : summary.bytes.at(1)) {
        const Message value = parse_message(v);
        if (!value.error.empty() || !value.bytes.count(1) || !value.numbers.count(2) || value.wire_types.at(2) != 5)
          return fail("Summary.Value without a tag and a float simple_value");
        const auto bits = static_cast<uint32_t>(value.numbers.at(2).back());
        float f = 0;
        std::memcpy(&f, &bits, sizeof f);
        p.values.emplace_back(value.bytes.at(1).back(), f);
      }
    }
    out.events.push_back(std::move(p));
  }
  return out;
}

}  // namespace rn50::testing

// tests/core/test_safetensors.cpp: the safetensors writer and reader: round trip, and one test per defect.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <string>

#include "core/files.h"
#include "core/safetensors.h"
#include "tests/support/error_of.h"
#include "tests/support/temp_dir.h"

namespace rn50::safetensors {
namespace {

std::vector<uint8_t> with_header(const std::string& json, size_t data_bytes) {
  std::vector<uint8_t> out(8 + json.size() + data_bytes, 0);
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, json.data(), json.size());
  return out;
}

std::string error_of(std::vector<uint8_t> bytes) {
  try {
    parse(std::move(bytes), "test.safetensors");
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, RoundTripKeepsNamesDtypesShapesBytesAndMetadata) {
  std::mt19937 rng(3);
  std::vector<std::vector<uint8_t>> payloads;
  std::vector<TensorView> views;
  const std::vector<std::pair<DType, std::vector<int64_t>>> specs = {
      {DType::F32, {3, 4}}, {DType::I64, {}}, {DType::BF16, {5}}, {DType::U8, {2, 0, 3}}, {DType::F64, {2, 2, 2}}};
  for (size_t i = 0; i < specs.size(); ++i) {
    size_t numel = 1;
    for (int64_t d : specs[i].second) numel *= static_cast<size_t>(d);
    payloads.emplace_back(numel * element_size(specs[i].first));
    for (auto& b : payloads.back()) b = static_cast<uint8_t>(rng());
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    views.push_back({"t" + std::to_string(specs.size() - i), specs[i].first, specs[i].second, payloads[i].data(),
                     payloads[i].size()});
  }
  const std::vector<uint8_t> bytes = serialize(views, {{"classes", "[\"a\"]"}, {"epoch", "3"}});
  EXPECT_EQ(bytes[0] % 8, 0);  // the header is padded so that the data starts 8-byte aligned
  const File file = parse(bytes, "memory");
  EXPECT_EQ(file.metadata.at("epoch"), "3");
  EXPECT_EQ(file.metadata.at("classes"), "[\"a\"]");
  ASSERT_EQ(file.tensors.size(), views.size());
  for (const auto& v : views) {
    const TensorView* t = file.find(v.name);
    ASSERT_NE(t, nullptr) << v.name;
    EXPECT_EQ(t->dtype, v.dtype);
    EXPECT_EQ(t->shape, v.shape);
    ASSERT_EQ(t->bytes, v.bytes);
    EXPECT_EQ(std::memcmp(t->data, v.data, v.bytes), 0) << v.name;
  }
  EXPECT_EQ(file.find("missing"), nullptr);
}

TEST(Safetensors, WritesAtomically) {
  rn50::testing::TempDir dir;
  const float x[2] = {1.5f, -2.0f};
  files::write_atomically(dir.file("a.safetensors"),
                          serialize({{"x", DType::F32, {2}, reinterpret_cast<const uint8_t*>(x), 8}}, {}));
  EXPECT_FALSE(rn50::testing::file_exists(dir.file("a.safetensors.tmp")));
  const File f = read_file(dir.file("a.safetensors"));
  EXPECT_EQ(std::memcmp(f.find("x")->data, x, 8), 0);
}

TEST(Safetensors, RejectsATooShortFile) { EXPECT_NE(error_of({1, 2, 3}).find("shorter"), std::string::npos); }

TEST(Safetensors, RejectsAHeaderLengthPastTheEnd) {
  auto bytes = with_header("{}", 0);
  bytes[0] = 200;
  EXPECT_NE(error_of(bytes).find("past the end"), std::string::npos);
  bytes[0] = 0;
  bytes[7] = 0x80;  // 2^63
  EXPECT_NE(error_of(bytes).find("exceeds"), std::string::npos);
}

TEST(Safetensors, RejectsAHeaderThatIsNotAJsonObject) {
  EXPECT_NE(error_of(with_header("{\"a\": ", 0)).find("not JSON"), std::string::npos);
  EXPECT_NE(error_of(with_header("[1, 2]  ", 0)).find("not a JSON object"), std::string::npos);
}

TEST(Safetensors, RejectsOffsetsOutsideTheData) {
  const std::string json = R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})";
  EXPECT_NE(error_of(with_header(json, 8)).find("outside"), std::string::npos);
  const std::string reversed = R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 0]}})";
  EXPECT_NE(error_of(with_header(reversed, 8)).find("outside"), std::string::npos);
}

TEST(Safetensors, RejectsOverlappingRanges) {
  const std::string json = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                               "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})";
  EXPECT_NE(error_of(with_header(json, 12)).find("overlap"), std::string::npos);
}

TEST(Safetensors, RejectsBytesNoTensorCovers) {
  const std::string json = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})";
  EXPECT_NE(error_of(with_header(json, 12)).find("belong to no tensor"), std::string::npos);
}

TEST(Safetensors, RejectsUnknownDtypes) {
  const std::string json = R"({"a": {"dtype": "F128", "shape": [1], "data_offsets": [0, 16]}})";
  EXPECT_NE(error_of(with_header(json, 16)).find("unknown dtype"), std::string::npos);
}

TEST(Safetensors, RejectsASizeThatDisagreesWithTheShape) {
  const std::string json = R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})";
  EXPECT_NE(error_of(with_header(json, 8)).find("need"), std::string::npos);
  const std::string negative = R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})";
  EXPECT_NE(error_of(with_header(negative, 8)).find("bad dimension"), std::string::npos);
}

TEST(Safetensors, RejectsMalformedEntries) {
  EXPECT_NE(error_of(with_header(R"({"a": {"dtype": "F32"}})", 0)).find("lacks"), std::string::npos);
  EXPECT_NE(error_of(with_header(R"({"__metadata__": {"k": 1}})", 0)).find("not a string"), std::string::npos);
}

TEST(Safetensors, RejectsANameGivenTwice) {
  const std::string json = R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]},
                               "a": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}})";
  EXPECT_NE(error_of(with_header(json, 0)).find("'a' appears twice"), std::string::npos);
  const std::string metadata = R"({"__metadata__": {"k": "1"}, "__metadata__": {"k": "2"}})";
  EXPECT_NE(error_of(with_header(metadata, 0)).find("__metadata__ appears twice"), std::string::npos);
  const uint8_t byte = 0;
  EXPECT_THROW(serialize({{"x", DType::U8, {1}, &byte, 1}, {"x", DType::U8, {1}, &byte, 1}}, {}),
               std::invalid_argument);
}

TEST(Safetensors, StringListsKeepAnyBytesAndEscapeWhatIsNotUtf8AsPythonDoes) {
  const std::vector<std::string> names = {"n01440764", "caf\xc3\xa9",  "\xf0\x9f\x98\x80",
                                          "\xff\xfe",  "ok\xe2\x82",   "q\"b\\s/\n\t\x01",
                                          "",          "\xed\xa0\x80", "\xc0\xaf"};
  const std::string json = encode_string_list(names);
  // Python: json.dumps([os.fsdecode(b) for b in names], ensure_ascii=False) with the surrogates escaped.
  EXPECT_EQ(json,
            "[\"n01440764\",\"caf\xc3\xa9\",\"\xf0\x9f\x98\x80\",\"\\udcff\\udcfe\",\"ok\\udce2\\udc82\","
            "\"q\\\"b\\\\s/\\n\\t\\u0001\",\"\",\"\\udced\\udca0\\udc80\",\"\\udcc0\\udcaf\"]");
  EXPECT_EQ(decode_string_list(json), names);
  // UTF-8 names come out as nlohmann writes them (checkpoints from before read the same).
  const std::vector<std::string> utf8 = {"a", "caf\xc3\xa9", "q\"\\\x1f"};
  EXPECT_EQ(encode_string_list(utf8), "[\"a\",\"caf\xc3\xa9\",\"q\\\"\\\\\\u001f\"]");  // nlohmann::json(utf8).dump()
  // What other JSON writers write: spaces, \u escapes, surrogate pairs, an escaped slash.
  EXPECT_EQ(decode_string_list(" [ \"caf\\u00e9\" , \"\\ud83d\\ude00\", \"a\\/b\" ] "),
            (std::vector<std::string>{"caf\xc3\xa9", "\xf0\x9f\x98\x80", "a/b"}));
  EXPECT_EQ(decode_string_list("[]"), std::vector<std::string>{});
  for (const std::string bad : {"", "[", "[\"a\"", "[\"a\",]", "[1]", "[\"a\"] x", "[\"\\ud83d\"]", "[\"\\udc00\"]",
                                "[\"\\x\"]", "[\"\\u12g4\"]", "[\"a\nb\"]", "{\"a\": 1}", "[[\"a\"]]"}) {
    EXPECT_THROW(decode_string_list(bad), FormatError) << bad;
  }
  // Deep nesting is refused at its first byte, without recursion.
  EXPECT_THROW(decode_string_list(std::string(100000, '[') + std::string(100000, ']')), FormatError);
}

// Hostile files: each gives a short FormatError, in bounded time and memory.

std::string read_error(const std::string& path) {
  return rn50::testing::error_of<FormatError>([&] { read_file(path); });
}

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

TEST(Safetensors, RefusesDeeplyNestedJsonWhileParsingIt) {
  // 50,000 nested lists as a dtype: printing it into the message once overflowed the stack.
  const std::string deep = std::string(50000, '[') + std::string(50000, ']');
  const std::string e =
      error_of(with_header("{\"x\":{\"dtype\":" + deep + ",\"shape\":[],\"data_offsets\":[0,0]}}", 0));
  EXPECT_NE(e.find("nested deeper than"), std::string::npos) << e.substr(0, 200);
  EXPECT_LT(e.size(), 200u);
}

TEST(Safetensors, QuotesBadValuesBoundedly) {
  const std::string long_name(10000, 'd');
  std::string e =
      error_of(with_header("{\"x\":{\"dtype\":\"" + long_name + "\",\"shape\":[],\"data_offsets\":[0,0]}}", 0));
  EXPECT_NE(e.find("unknown dtype"), std::string::npos) << e.substr(0, 200);
  EXPECT_LT(e.size(), 200u);
  e = error_of(with_header("{\"" + long_name + "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,2]}}", 0));
  EXPECT_NE(e.find("outside the 0 data bytes"), std::string::npos) << e.substr(0, 200);
  EXPECT_LT(e.size(), 250u);
  e = error_of(with_header("{\"x\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4));
  EXPECT_NE(e.find("9 dimensions"), std::string::npos) << e;
}

// `count` empty U8 tensors whose names are `name_length` characters long, named in reverse order of their index.
std::vector<uint8_t> many_tensors(size_t count, size_t name_length) {
  std::vector<TensorView> views(count);
  for (size_t i = 0; i < count; ++i) {
    std::string index = std::to_string(count - i);
    views[i].name = "t" + std::string(name_length - 1 - index.size(), '0') + index;
    views[i].dtype = DType::U8;
    views[i].shape = {0};
  }
  return serialize(views, {{"classes", "[\"a\"]"}});
}

double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

TEST(Safetensors, ParsesTheMostTensorsAllowedInLinearTime) {
  // 2^20 tensors with 48-character names: the tensor-count limit and a header just under its 100 MiB. The parse
  // was quadratic (25,000 tensors took 23 s of CPU, a million never finished); this takes about 2 s of CPU on a
  // loaded 2-core machine. CPU time, so that other processes on the machine do not count.
  const size_t limit = size_t{1} << 20;
  rn50::testing::TempDir dir;
  const std::string path = dir.file("many.safetensors");
  {
    const std::vector<uint8_t> bytes = many_tensors(limit, 48);
    ASSERT_GT(bytes.size(), size_t{99} << 20);
    ASSERT_LT(bytes.size(), size_t{100} << 20);
    files::write_atomically(path, bytes);
  }
  const double start = cpu_seconds();
  const File file = read_file(path);
  const double seconds = cpu_seconds() - start;
  std::printf("read_file of %zu tensors: %.2f s of CPU\n", file.tensors.size(), seconds);
  EXPECT_LT(seconds, 5.0);
  ASSERT_EQ(file.tensors.size(), limit);
  EXPECT_EQ(file.metadata.at("classes"), "[\"a\"]");
  EXPECT_NE(file.find("t" + std::string(40, '0') + "1048576"), nullptr);  // lookups stay a binary search
  EXPECT_EQ(file.find("t" + std::string(47, '0')), nullptr);              // index 0: none
  // One more is refused while parsing, before it is kept.
  const double again = cpu_seconds();
  EXPECT_NE(error_of(many_tensors(limit + 1, 8)).find("more than 1048576 tensors"), std::string::npos);
  EXPECT_LT(cpu_seconds() - again, 10.0);  // the serialisation too: its header is written in one pass
}

TEST(Safetensors, ReadsTheHeaderBeforeTheData) {
  // A 3 GiB sparse file whose header is not JSON: refused after reading its header, not the whole file.
  rn50::testing::TempDir dir;
  const std::string path = dir.file("big.safetensors");
  std::vector<uint8_t> head = with_header("{not json}", 0);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(head.data()), static_cast<std::streamsize>(head.size()));
  }
  ASSERT_EQ(::truncate(path.c_str(), off_t{3} << 30), 0);
  const double before = peak_rss_mib();
  const std::string e = read_error(path);
  EXPECT_NE(e.find("header is not JSON"), std::string::npos) << e;
  EXPECT_LT(peak_rss_mib() - before, 256.0) << "MiB of peak memory for a refused 3 GiB file";
}

TEST(Safetensors, RefusesFilesThatAreNotRegularWithoutOpeningThem) {
  rn50::testing::TempDir dir;
  const std::string fifo = dir.file("w.safetensors");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(read_error(fifo).find("not a regular file"), std::string::npos);  // would block in open otherwise
  EXPECT_NE(read_error("/dev/zero").find("not a regular file"), std::string::npos);
  EXPECT_NE(read_error(dir.path()).find("not a regular file"), std::string::npos);
  EXPECT_NE(read_error(dir.file("none")).find("cannot read"), std::string::npos);
}

}  // namespace
}  // namespace rn50::safetensors

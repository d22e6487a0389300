// Probe, 2026-11-30 (f): does nvJPEG route an image from its header alone? nvjpegJpegStreamParseHeader on the
// whole file against the bytes up to the end of the first SOS segment header, with and without an EOI marker
// appended: status, frame size, nvjpegDecodeBatchedSupported, and host time per parse.
// Build: g++ -O2 -std=c++17 parse_probe.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lnvjpeg -lcudart
// Run:   ./parse_probe FILE...
#include <nvjpeg.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

static size_t header_end(const std::vector<unsigned char>& b) {  // after the first SOS segment; 0 if none
  size_t pos = 2;
  while (pos + 4 <= b.size()) {
    if (b[pos] != 0xFF) { ++pos; continue; }
    const unsigned char marker = b[pos + 1];
    if (marker == 0xFF || marker == 0x00 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) { ++pos; continue; }
    const size_t length = (size_t(b[pos + 2]) << 8) | b[pos + 3];
    if (marker == 0xDA) return pos + 2 + length;
    pos += 2 + length;
  }
  return 0;
}

int main(int argc, char** argv) {
  nvjpegHandle_t handle = nullptr;
  nvjpegStatus_t s = nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, 0, &handle);
  std::printf("hardware handle: %d\n", int(s));
  if (s != NVJPEG_STATUS_SUCCESS) return 1;
  nvjpegJpegStream_t stream = nullptr;
  nvjpegJpegStreamCreate(handle, &stream);
  double t[3] = {0, 0, 0};
  int ok[3] = {0, 0, 0}, supported[3] = {0, 0, 0}, same[3] = {0, 0, 0}, files = 0;
  for (int f = 1; f < argc; ++f) {
    std::ifstream in(argv[f], std::ios::binary);
    std::vector<unsigned char> whole((std::istreambuf_iterator<char>(in)), {});
    const size_t end = header_end(whole);
    if (end == 0) { std::printf("%s: no SOS\n", argv[f]); continue; }
    std::vector<unsigned char> prefix(whole.begin(), whole.begin() + end), with_eoi = prefix;
    with_eoi.push_back(0xFF);
    with_eoi.push_back(0xD9);
    const std::vector<unsigned char>* inputs[3] = {&whole, &prefix, &with_eoi};
    unsigned w0 = 0, h0 = 0;
    ++files;
    for (int v = 0; v < 3; ++v) {
      const int reps = 20;
      nvjpegStatus_t st = NVJPEG_STATUS_SUCCESS;
      const auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < reps; ++r) st = nvjpegJpegStreamParseHeader(handle, inputs[v]->data(), inputs[v]->size(), stream);
      t[v] += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / reps;
      if (st != NVJPEG_STATUS_SUCCESS) {
        if (f == 1) std::printf("variant %d: status %d\n", v, int(st));
        continue;
      }
      ++ok[v];
      unsigned w = 0, h = 0;
      nvjpegJpegStreamGetFrameDimensions(stream, &w, &h);
      int unsupported = -1;
      nvjpegDecodeBatchedSupported(handle, stream, &unsupported);
      if (unsupported == 0) ++supported[v];
      if (v == 0) { w0 = w; h0 = h; }
      if (w == w0 && h == h0) ++same[v];
    }
  }
  const char* names[3] = {"whole file", "up to the SOS header", "that + EOI"};
  for (int v = 0; v < 3; ++v)
    std::printf("%-22s files %d parsed %d batched-supported %d same size %d, %.2f us per parse\n", names[v], files,
                ok[v], supported[v], same[v], files ? t[v] / files : 0.0);
  return 0;
}

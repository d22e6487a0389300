// tests/input/gpu_decode/test_gpu_decoder_calls.cpp (GPU machine, nvJPEG builds only): the GPU decoder's calls:
// misuse refused, drain and failed decodes, validation's skipped samples, no wait for work queued before it, every
// output dtype and layout, bad files counted and replaced.
#include "tests/input/gpu_decode/gpu_decode_fixtures.h"

namespace rn50::gpu_decode_test {
namespace {

// Misuse is an error, not a silent wrong batch: finish_into with nothing submitted, one batch more submitted while
// every slot holds one waiting for finish_into (for the default depth and a deeper one), a depth below 1.
TEST_F(GeneratedJpegs, SubmitAndFinishRefuseMisuse) {
  const int size = 64;
  const data::JpegFolderDataset set = dataset(true, size);
  const int64_t n = static_cast<int64_t>(set.size());
  at::Tensor x = at::empty({n, 3, size, size}, at::TensorOptions(at::kCUDA).dtype(at::kFloat));
  at::Tensor y = at::empty({n}, at::TensorOptions(at::kCUDA).dtype(at::kLong));
  RotatedBatches batches(set, 1);
  const data::HostBatch batch = batches.batch(0);
  const input::BadDecodeHandler fail = [](size_t, const std::string& reason) { ADD_FAILURE() << reason; };
  for (const int ahead : {2, 3}) {
    input::GpuDecoderOptions options;
    options.submit_ahead = ahead;
    input::GpuJpegDecoder decoder(0, static_cast<int>(n), size, options);
    EXPECT_THROW(decoder.finish_into(x, y), std::logic_error);
    ASSERT_EQ(input::GpuJpegDecoder::slots(options), ahead + 1);
    for (int i = 0; i < ahead + 1; ++i) decoder.submit(batch, fail, {});
    EXPECT_THROW(decoder.submit(batch, fail, {}), std::logic_error) << ahead << " ahead";
    for (int i = 0; i < ahead + 1; ++i) decoder.finish_into(x, y);
    decoder.drain();
  }
  input::GpuDecoderOptions none;
  none.submit_ahead = 0;
  EXPECT_THROW(input::GpuJpegDecoder(0, static_cast<int>(n), size, none), std::invalid_argument);
}

// The trainer's epoch boundary: the next epoch's first batch is submitted during the last step, then the epoch
// drains. drain hands back the finished batch only; the submitted one stays, and the next finish_into makes it.
TEST_F(GeneratedJpegs, DrainKeepsASubmittedBatchForTheNextFinish) {
  const int size = 64;
  const data::JpegFolderDataset set = dataset(true, size);
  const int64_t n = static_cast<int64_t>(set.size());
  input::GpuJpegDecoder decoder(0, static_cast<int>(n), size);
  RotatedBatches batches(set, 2);
  const data::HostBatch held[2] = {batches.batch(0), batches.batch(1)};  // labels 10 * b + i
  std::vector<int> released(2, 0);
  const input::BadDecodeHandler fail = [](size_t, const std::string& reason) { ADD_FAILURE() << reason; };
  auto release = [&](const data::HostBatch& b) { ++released.at(static_cast<size_t>(b.index)); };
  at::Tensor x = at::empty({n, 3, size, size}, at::TensorOptions(at::kCUDA).dtype(at::kFloat));
  at::Tensor y = at::empty({n}, at::TensorOptions(at::kCUDA).dtype(at::kLong));
  decoder.submit(held[0], fail, release);
  decoder.finish_into(x, y);               // the epoch's last step's input
  decoder.submit(held[1], fail, release);  // the next epoch's first batch
  decoder.drain();
  EXPECT_EQ(released, (std::vector<int>{1, 0}));
  decoder.finish_into(x, y);
  decoder.drain();
  EXPECT_EQ(released, (std::vector<int>{1, 1}));
  const at::Tensor got = y.cpu();
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(got.data_ptr<int64_t>()[i], 10 + i);
  batches.expect_matches_cpu(1, x, size);
}

// A decode that fails on the decode thread (strict mode's handler throwing for a file nothing decodes) comes out
// of that batch's finish_into, the batch handed back at once; the batch submitted after it still decodes. Then
// abandon() with two batches submitted forgets both (handing neither back), and the decoder decodes again.
TEST_F(GeneratedJpegs, AFailedDecodeComesOutOfItsFinishAndTheNextBatchesStillDecode) {
  const int size = 64;
  const data::JpegFolderDataset set = dataset(true, size);
  const int64_t n = static_cast<int64_t>(set.size());
  input::GpuJpegDecoder decoder(0, static_cast<int>(n), size);
  RotatedBatches batches(set, 5);
  std::vector<data::HostBatch> held;
  for (int b = 0; b < 5; ++b) held.push_back(batches.batch(b));
  held[0].encoded[0].bytes = test::undefined_table_jpeg(held[0].encoded[0].bytes);  // header reads, data not
  std::vector<int> released(5, 0);
  auto release = [&](const data::HostBatch& b) { ++released.at(static_cast<size_t>(b.index)); };
  const input::BadDecodeHandler strict = [](size_t, const std::string& reason) {
    throw DecodeError("bad sample (strict mode): " + reason);
  };
  at::Tensor x = at::empty({n, 3, size, size}, at::TensorOptions(at::kCUDA).dtype(at::kFloat));
  at::Tensor y = at::empty({n}, at::TensorOptions(at::kCUDA).dtype(at::kLong));
  decoder.submit(held[0], strict, release);
  decoder.submit(held[1], strict, release);
  EXPECT_THROW(decoder.finish_into(x, y), DecodeError);
  EXPECT_EQ(released[0], 1);
  decoder.finish_into(x, y);  // batch 1
  decoder.drain();
  EXPECT_EQ(released, (std::vector<int>{1, 1, 0, 0, 0}));
  EXPECT_EQ(decoder.take_counts().bad, 1);
  const at::Tensor labels = y.cpu();
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(labels.data_ptr<int64_t>()[i], 10 + i);
  batches.expect_matches_cpu(1, x, size);

  decoder.submit(held[2], strict, release);
  decoder.submit(held[3], strict, release);
  decoder.abandon();
  EXPECT_EQ(released, (std::vector<int>{1, 1, 0, 0, 0}));
  EXPECT_THROW(decoder.finish_into(x, y), std::logic_error);  // nothing submitted any more
  decoder.decode_into(held[4], x, y, strict, release);
  decoder.drain();
  EXPECT_EQ(released, (std::vector<int>{1, 1, 0, 0, 1}));
  batches.expect_matches_cpu(4, x, size);
}

// Validation's batches (skip_bad): what nothing decodes is reported once and labelled data::kSkippedLabel instead of
// taking a neighbour's image and label, a sample the loader already skipped is neither decoded nor reported again,
// and a batch of nothing but such samples is not an error.
TEST_F(GeneratedJpegs, UnderSkipBadWhatNothingDecodesIsLabelledSkipped) {
  const int size = 64;
  const data::JpegFolderDataset set = dataset(true, size);
  const int64_t n = static_cast<int64_t>(set.size());
  input::GpuJpegDecoder decoder(0, static_cast<int>(n), size);
  RotatedBatches batches(set, 2);
  data::HostBatch batch = batches.batch(0);  // labels i
  batch.skip_bad = true;
  batch.encoded[0].bytes = test::undefined_table_jpeg(batch.encoded[0].bytes);  // header reads, data not
  batch.encoded[1].skipped = true;
  batch.labels[1] = data::kSkippedLabel;
  int reported = 0;
  const input::BadDecodeHandler count = [&](size_t, const std::string&) { ++reported; };
  at::Tensor x = at::empty({n, 3, size, size}, at::TensorOptions(at::kCUDA).dtype(at::kFloat));
  at::Tensor y = at::empty({n}, at::TensorOptions(at::kCUDA).dtype(at::kLong));
  decoder.decode_into(batch, x, y, count, {});
  decoder.drain();
  EXPECT_EQ(reported, 1);
  EXPECT_EQ(decoder.take_counts().bad, 1);
  const at::Tensor labels = y.cpu();
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(labels.data_ptr<int64_t>()[i], i < 2 ? data::kSkippedLabel : i) << i;
  EXPECT_TRUE(x.isfinite().all().item<bool>());

  data::HostBatch none = batches.batch(1);
  none.skip_bad = true;
  for (int64_t i = 0; i < n; ++i) none.encoded[i].skipped = true;
  decoder.decode_into(none, x, y, count, {});
  decoder.drain();
  EXPECT_EQ(reported, 1);
  EXPECT_TRUE(y.cpu().eq(data::kSkippedLabel).all().item<bool>());
  EXPECT_TRUE(x.isfinite().all().item<bool>());
}

// A batch's decode must not wait on the host for a step queued before it (nvJPEG resizing its buffers through
// cudaFree, or a label copy from pageable memory, would). With about 200 ms of matrix products queued on the
// current stream (their time measured with events), one decode_into of these 8 images must return in less than
// half that time; its own host work is about a millisecond, and a call that waits for the device takes the whole
// queue. It passes on the H200; the per-step wait measured there in training is another one: nvJPEG's hardware
// call waiting for the previous batch's decode (docs/gpu-decoding.md).
TEST_F(GeneratedJpegs, DecodingDoesNotWaitForWorkQueuedBeforeIt) {
  const int size = 64;
  const data::JpegFolderDataset set = dataset(true, size);
  const int64_t n = static_cast<int64_t>(set.size());
  input::GpuJpegDecoder decoder(0, static_cast<int>(n), size);
  constexpr int kBatches = 4;
  std::vector<std::vector<data::EncodedSample>> samples(kBatches, std::vector<data::EncodedSample>(n));
  std::vector<std::vector<int64_t>> labels(kBatches, std::vector<int64_t>(n, 3));  // pageable, as without pin_memory
  at::Tensor x = at::empty({n, 3, size, size}, at::TensorOptions(at::kCUDA).dtype(at::kHalf));
  at::Tensor y = at::empty({n}, at::TensorOptions(at::kCUDA).dtype(at::kLong));
  auto decode = [&](int b) {
    for (int64_t i = 0; i < n; ++i) set.load_encoded(static_cast<size_t>(i), static_cast<uint64_t>(b), samples[b][i]);
    data::HostBatch batch;
    batch.labels = labels[b].data();
    batch.size = n;
    batch.index = b;
    batch.encoded = samples[b].data();
    decoder.decode_into(
        batch, x, y, [](size_t, const std::string& reason) { ADD_FAILURE() << reason; }, [](const data::HostBatch&) {});
  };
  for (int b = 0; b + 1 < kBatches; ++b) decode(b);  // nvJPEG's buffers and every slot in use once
  decoder.drain();

  const auto options = at::TensorOptions(at::kCUDA).dtype(at::kFloat);
  const at::Tensor a = at::rand({4096, 4096}, options);
  at::Tensor product = at::empty({4096, 4096}, options);
  at::cuda::getCurrentCUDAStream().synchronize();
  at::cuda::CUDAEvent queued_start(cudaEventDefault), queued_end(cudaEventDefault);
  queued_start.record();
  for (int k = 0; k < 80; ++k) at::mm_out(product, a, a);  // about 2.7 ms each in FP32 on an H200
  queued_end.record();
  const auto call_start = std::chrono::steady_clock::now();
  decode(kBatches - 1);
  const double call_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - call_start).count();
  decoder.drain();
  at::cuda::getCurrentCUDAStream().synchronize();
  const double queued_ms = queued_start.elapsed_time(queued_end);
  std::printf("[ measured ] decode_into of %lld images: %.2f ms, with %.1f ms of work queued before it\n",
              static_cast<long long>(n), call_ms, queued_ms);
  ASSERT_GT(queued_ms, 50.0) << "too little work queued for the check to mean anything";
  EXPECT_LT(call_ms, queued_ms / 2) << "decode_into waited for the work queued before it";
  EXPECT_EQ(y.cpu().data_ptr<int64_t>()[0], 3);
}

// Every dtype and layout the step's input can have gets the same values (fp32 exact; fp16 and bf16 within their
// rounding: 1e-3 and 8e-3 relative), written in place into the given tensor.
TEST_F(GeneratedJpegs, WritesEveryDtypeAndLayoutInPlace) {
  const int size = 64;
  const data::JpegFolderDataset set = dataset(true, size);
  const int64_t n = static_cast<int64_t>(set.size());
  RotatedBatches batches(set, 1);
  const data::HostBatch batch = batches.batch(0);
  input::GpuJpegDecoder decoder(0, static_cast<int>(n), size);
  const at::Tensor y = at::empty({n}, at::TensorOptions(at::kCUDA).dtype(at::kLong));
  at::Tensor reference;
  for (auto dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
    for (bool channels_last : {false, true}) {
      at::Tensor x = at::full({n, 3, size, size}, std::nan(""), at::TensorOptions(at::kCUDA).dtype(dtype));
      if (channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
      const void* storage = x.data_ptr();
      at::Tensor labels_out = y;
      decoder.decode_into(batch, x, labels_out, nullptr, nullptr);
      decoder.drain();
      EXPECT_EQ(x.data_ptr(), storage);  // the step's static input: written in place, never replaced
      EXPECT_EQ(x.is_contiguous(at::MemoryFormat::ChannelsLast), channels_last);
      ASSERT_FALSE(x.isnan().any().item<bool>()) << dtype << " channels_last " << channels_last;
      const at::Tensor got = x.to(at::kFloat).contiguous();
      if (!reference.defined()) {
        reference = got;
        continue;
      }
      const double rel = (got - reference).norm().item<double>() / reference.norm().item<double>();
      EXPECT_LT(rel, dtype == at::kFloat ? 1e-7 : (dtype == at::kHalf ? 1e-3 : 8e-3))
          << dtype << " channels_last " << channels_last;
    }
  }
  // Shapes that do not fit are refused before any work.
  at::Tensor wrong = at::empty({n, 3, size + 1, size + 1}, at::TensorOptions(at::kCUDA));
  at::Tensor labels_out = y;
  EXPECT_ANY_THROW(decoder.decode_into(batch, wrong, labels_out, nullptr, nullptr));
}

// Bad files, the CPU loader's way: what the loader threads can tell from the file (empty, truncated, a PNG named
// .JPEG) is counted there and replaced by the next sample; a file whose header reads but which neither nvJPEG nor
// libjpeg decodes is counted by the decoder and replaced by the next decoded image of its batch, label included.
// strict_data's handler stops at it.
TEST_F(GpuDecode, BadFilesAreCountedAndReplaced) {
  TempDir tmp;
  const std::string root = tmp.path() + "/train";
  for (int i = 0; i < 10; ++i) {
    const std::vector<uint8_t> pixels = test::smooth_image(160, 120, 0.3 * i);
    write_file(root + (i < 5 ? "/c0/" : "/c1/") + "img" + std::to_string(i) + ".JPEG",
               codecs::encode_jpeg(pixels.data(), 160, 120, 3, 90));
  }
  const std::vector<uint8_t> good = read_file(root + "/c0/img1.JPEG");
  write_file(root + "/c0/img1_empty.JPEG", {});
  write_file(root + "/c0/img2_truncated.JPEG",
             std::vector<uint8_t>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2)));
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  png.resize(400, 0);
  write_file(root + "/c1/img6_png.JPEG", png);
  write_file(root + "/c1/img7_undecodable.JPEG", test::undefined_table_jpeg(good));

  data::SampleTransform transform;
  transform.image_size = 32;
  transform.seed = 2;
  const data::JpegFolderDataset set(data::scan_image_folder(root), transform);
  ASSERT_EQ(set.size(), 14u);
  size_t undecodable = set.size();
  for (size_t i = 0; i < set.size(); ++i)
    if (set.describe(i).find("undecodable") != std::string::npos) undecodable = i;

  for (bool strict : {false, true}) {
    data::BatchPool pool(4, 7, 32, make_pageable_allocator(), data::BatchContent::kEncoded);
    data::LoaderOptions options;
    options.batch_size = 7;
    options.workers = 2;
    std::set<std::string> loader_bad;
    std::mutex mutex;
    data::BatchLoader loader(set, data::epoch_order(set.size(), 2, 0, false), 0, options, pool,
                             [&](const std::string& what, const std::string&) {
                               std::lock_guard<std::mutex> lock(mutex);
                               loader_bad.insert(file_name(what));
                             });
    input::GpuJpegDecoder decoder(0, 7, 32);
    std::vector<size_t> device_bad;
    const input::BadDecodeHandler on_bad = [&](size_t index, const std::string& reason) {
      device_bad.push_back(index);
      EXPECT_NE(reason.find("libjpeg"), std::string::npos) << reason;
      if (strict) throw DecodeError("bad sample (strict mode): " + set.describe(index));
    };
    bool stopped = false;
    while (const std::optional<data::HostBatch> batch = loader.next()) {
      std::vector<size_t> indices;
      for (int64_t i = 0; i < batch->size; ++i) indices.push_back(batch->encoded[i].index);
      at::Tensor x = at::empty({batch->size, 3, 32, 32}, at::TensorOptions(at::kCUDA));
      at::Tensor y = at::empty({batch->size}, at::TensorOptions(at::kCUDA).dtype(at::kLong));
      try {
        decoder.decode_into(*batch, x, y, on_bad, [&loader](const data::HostBatch& b) { loader.release(b); });
      } catch (const DecodeError& e) {
        EXPECT_TRUE(strict) << e.what();
        EXPECT_NE(std::string(e.what()).find("undecodable"), std::string::npos);
        stopped = true;
        break;
      }
      const at::Tensor xs = x.cpu(), ys = y.cpu();
      for (int64_t i = 0; i < batch->size; ++i) {
        if (indices[i] != undecodable) {
          EXPECT_EQ(ys[i].item<int64_t>(), set.label(indices[i]));
          continue;
        }
        // Replaced by the next position of the batch (a good one here), image and label.
        const int64_t from = (i + 1) % batch->size;
        EXPECT_EQ(ys[i].item<int64_t>(), ys[from].item<int64_t>());
        EXPECT_TRUE(xs[i].equal(xs[from]));
      }
    }
    decoder.drain();  // before the loader, which owns the batches
    EXPECT_EQ(loader_bad, (std::set<std::string>{"img1_empty.JPEG", "img2_truncated.JPEG", "img6_png.JPEG"}));
    EXPECT_EQ(loader.bad_samples(), 3);
    EXPECT_EQ(device_bad, std::vector<size_t>{undecodable});
    EXPECT_EQ(stopped, strict);
    if (!strict) {
      EXPECT_EQ(decoder.take_counts().bad, 1);
    }
  }
}

}  // namespace
}  // namespace rn50::gpu_decode_test

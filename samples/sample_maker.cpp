// samples/sample_maker.cpp: make_sample_dataset, a synthetic ImageNet-layout JPEG dataset (shape x colour x texture
// classes drawn over varied backgrounds), reproducible from its seed.
#include "samples/sample_maker.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <exception>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "codecs/jpeg_codec.h"
#include "core/affinity.h"
#include "core/errors.h"
#include "core/files.h"
#include "core/log.h"
#include "data/random_draws.h"

namespace rn50::samples {
namespace {

namespace fs = std::filesystem;

enum class Shape { kCircle, kSquare, kTriangle, kCross, kRing, kStar, kDiamond, kHexagon };
constexpr std::array<Shape, 8> kShapes = {Shape::kCircle, Shape::kSquare, Shape::kTriangle, Shape::kCross,
                                          Shape::kRing,   Shape::kStar,   Shape::kDiamond,  Shape::kHexagon};
constexpr std::array<const char*, 8> kShapeNames = {"circle", "square", "triangle", "cross",
                                                    "ring",   "star",   "diamond",  "hexagon"};
enum class Texture { kPlain, kStripes, kChecker, kDots };
constexpr std::array<Texture, 4> kTextures = {Texture::kPlain, Texture::kStripes, Texture::kChecker, Texture::kDots};
// Names of the hues 0, 30, ..., 330 degrees.
constexpr std::array<const char*, 12> kHueNames = {"red",  "orange", "yellow", "lime",   "green",   "spring",
                                                   "cyan", "azure",  "blue",   "violet", "magenta", "rose"};
constexpr double kPi = 3.141592653589793;

struct ClassLook {
  Shape shape;
  Texture texture;
  std::array<double, 3> rgb;  // 0..255
  std::string name;           // folder name
};

std::array<double, 3> hsv_to_rgb(double hue_degrees, double saturation, double value) {
  const double h = std::fmod(hue_degrees, 360.0) / 60.0;
  const double c = value * saturation;
  const double x = c * (1.0 - std::fabs(std::fmod(h, 2.0) - 1.0));
  const double m = value - c;
  std::array<double, 3> rgb{};
  switch (static_cast<int>(h)) {
    case 0:
      rgb = {c, x, 0};
      break;
    case 1:
      rgb = {x, c, 0};
      break;
    case 2:
      rgb = {0, c, x};
      break;
    case 3:
      rgb = {0, x, c};
      break;
    case 4:
      rgb = {x, 0, c};
      break;
    default:
      rgb = {c, 0, x};
      break;
  }
  for (double& v : rgb) v = (v + m) * 255.0;
  return rgb;
}

// Class c: shapes cycle fastest, textures shift every full cycle of shapes, hues are spread evenly, so every
// class is a distinct combination and neighbouring classes differ in all three.
ClassLook class_look(int c, int classes) {
  ClassLook look;
  look.shape = kShapes[static_cast<size_t>(c) % kShapes.size()];
  look.texture = kTextures[static_cast<size_t>(c + c / static_cast<int>(kShapes.size())) % kTextures.size()];
  const double hue = 360.0 * c / classes;
  look.rgb = hsv_to_rgb(hue, 0.85, 0.95);
  const int digits = std::max(4, static_cast<int>(std::to_string(classes - 1).size()));
  std::string number = std::to_string(c);
  number.insert(0, static_cast<size_t>(digits) - number.size(), '0');  // zero-padded: sorted order = class order
  const size_t hue_name = static_cast<size_t>(std::lround(hue / 30.0)) % kHueNames.size();
  look.name = "n" + number + "_" + kShapeNames[static_cast<size_t>(c) % kShapeNames.size()] + "_" + kHueNames[hue_name];
  return look;
}

// Points of a regular polygon-like outline, rotated by `angle` around (cx, cy), in cv's fixed-point units.
std::vector<cv::Point> outline(const std::vector<std::array<double, 2>>& unit_points, double cx, double cy, double r,
                               double angle, int shift) {
  const double cs = std::cos(angle), sn = std::sin(angle), one = static_cast<double>(1 << shift);
  std::vector<cv::Point> points;
  for (const auto& p : unit_points) {
    const double x = cx + r * (p[0] * cs - p[1] * sn);
    const double y = cy + r * (p[0] * sn + p[1] * cs);
    points.emplace_back(static_cast<int>(std::lround(x * one)), static_cast<int>(std::lround(y * one)));
  }
  return points;
}

std::vector<std::array<double, 2>> regular_polygon(int corners, double phase, double inner_ratio = 1.0) {
  std::vector<std::array<double, 2>> points;
  const int count = inner_ratio < 1.0 ? corners * 2 : corners;
  for (int k = 0; k < count; ++k) {
    const double a = phase + 2.0 * kPi * k / count;
    const double radius = (inner_ratio < 1.0 && k % 2 == 1) ? inner_ratio : 1.0;
    points.push_back({radius * std::cos(a), radius * std::sin(a)});
  }
  return points;
}

// Draws the shape's coverage (0..255, anti-aliased) into `mask`.
void draw_shape(Shape shape, double cx, double cy, double r, double angle, cv::Mat& mask) {
  constexpr int kShift = 4;  // sub-pixel precision of the outlines
  const double one = 1 << kShift;
  const cv::Point centre(static_cast<int>(std::lround(cx * one)), static_cast<int>(std::lround(cy * one)));
  auto fill = [&](const std::vector<std::array<double, 2>>& unit_points) {
    const std::vector<std::vector<cv::Point>> polygons = {outline(unit_points, cx, cy, r, angle, kShift)};
    cv::fillPoly(mask, polygons, cv::Scalar(255), cv::LINE_AA, kShift);
  };
  switch (shape) {
    case Shape::kCircle:
      cv::circle(mask, centre, static_cast<int>(std::lround(r * one)), cv::Scalar(255), cv::FILLED, cv::LINE_AA,
                 kShift);
      break;
    case Shape::kRing:
      cv::circle(mask, centre, static_cast<int>(std::lround(r * one)), cv::Scalar(255), cv::FILLED, cv::LINE_AA,
                 kShift);
      cv::circle(mask, centre, static_cast<int>(std::lround(r * 0.55 * one)), cv::Scalar(0), cv::FILLED, cv::LINE_AA,
                 kShift);
      break;
    case Shape::kSquare:
      fill(regular_polygon(4, kPi / 4));
      break;
    case Shape::kDiamond:
      fill({{0.0, -1.0}, {0.62, 0.0}, {0.0, 1.0}, {-0.62, 0.0}});
      break;
    case Shape::kTriangle:
      fill(regular_polygon(3, -kPi / 2));
      break;
    case Shape::kHexagon:
      fill(regular_polygon(6, 0.0));
      break;
    case Shape::kStar:
      fill(regular_polygon(5, -kPi / 2, 0.42));
      break;
    case Shape::kCross: {
      const double a = 0.3;  // half width of the bars
      fill(
          {{-a, -1}, {a, -1}, {a, -a}, {1, -a}, {1, a}, {a, a}, {a, 1}, {-a, 1}, {-a, a}, {-1, a}, {-1, -a}, {-a, -a}});
      break;
    }
  }
}

// 1 where the texture shows the class colour, a darker factor elsewhere; (u, v) are shape-aligned coordinates.
double texture_factor(Texture texture, double u, double v, double period) {
  constexpr double kDark = 0.4;
  switch (texture) {
    case Texture::kPlain:
      return 1.0;
    case Texture::kStripes:
      return (static_cast<int64_t>(std::floor(u / period)) % 2 == 0) ? 1.0 : kDark;
    case Texture::kChecker:
      return ((static_cast<int64_t>(std::floor(u / period)) + static_cast<int64_t>(std::floor(v / period))) % 2 == 0)
                 ? 1.0
                 : kDark;
    case Texture::kDots: {
      const double du = u / period - std::floor(u / period) - 0.5;
      const double dv = v / period - std::floor(v / period) - 0.5;
      return du * du + dv * dv < 0.09 ? kDark : 1.0;
    }
  }
  return 1.0;
}

uint8_t to_byte(double v) { return static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L)); }

// One image (HWC RGB) of class `look`, drawn from `rng`.
void render_image(const ClassLook& look, int width, int height, double noise, std::mt19937_64& rng, cv::Mat& mask,
                  std::vector<uint8_t>& pixels) {
  using data::detail::uniform_real;
  // Background: a muted random colour with a gradient, so that it never looks like a class colour.
  const double grey = uniform_real(rng, 60.0, 200.0);
  std::array<double, 3> background{};
  for (double& v : background) v = grey + uniform_real(rng, -25.0, 25.0);
  const double gradient_angle = uniform_real(rng, 0.0, 2.0 * kPi);
  const double gradient = uniform_real(rng, 0.0, 40.0) / std::max(width, height);
  const double gx = gradient * std::cos(gradient_angle), gy = gradient * std::sin(gradient_angle);

  // Shape: random place, size, slight rotation; colour jittered a little around the class colour.
  const double side = std::min(width, height);
  const double radius = side * uniform_real(rng, 0.24, 0.40);
  const double cx = width * 0.5 + uniform_real(rng, -0.5, 0.5) * (width - 2.0 * radius);
  const double cy = height * 0.5 + uniform_real(rng, -0.5, 0.5) * (height - 2.0 * radius);
  const double angle = uniform_real(rng, -0.35, 0.35);
  std::array<double, 3> colour = look.rgb;
  for (double& v : colour) v += uniform_real(rng, -15.0, 15.0);
  const double period = std::max(2.5, radius / uniform_real(rng, 2.5, 3.5));
  const double drawn_noise = uniform_real(rng, 2.0, 8.0);  // drawn either way: the other draws stay the same
  const double noise_sigma = noise > 0 ? noise : drawn_noise;

  mask.setTo(cv::Scalar(0));
  draw_shape(look.shape, cx, cy, radius, angle, mask);

  const double cs = std::cos(-angle), sn = std::sin(-angle);
  for (int y = 0; y < height; ++y) {
    const uint8_t* coverage = mask.ptr<uint8_t>(y);
    uint8_t* out = pixels.data() + static_cast<size_t>(y) * width * 3;
    for (int x = 0; x < width; ++x, out += 3) {
      const double alpha = coverage[x] / 255.0;
      double factor = 1.0;
      if (alpha > 0.0) {
        const double dx = x - cx, dy = y - cy;
        factor = texture_factor(look.texture, dx * cs - dy * sn, dx * sn + dy * cs, period);
      }
      const double shade = gx * (x - width * 0.5) + gy * (y - height * 0.5);
      for (int ch = 0; ch < 3; ++ch) {
        const double value = (1.0 - alpha) * (background[ch] + shade) + alpha * colour[ch] * factor;
        out[ch] = to_byte(value + noise_sigma * data::detail::normal(rng));
      }
    }
  }
}

void create_folder(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    const std::string reason = ec ? ec.message() : "a file of that name exists";
    throw DataError("cannot create folder " + dir.string() + ": " + reason);
  }
}

// A failed write (a full disk) removes what it wrote: a truncated JPEG left behind would be a bad sample in every run.
void write_file(const fs::path& path, const std::vector<uint8_t>& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw DataError("cannot write " + path.string() + ": " + files::errno_text(errno));
  size_t done = 0;
  int err = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : ENOSPC;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    ::unlink(path.c_str());
    throw DataError("cannot write " + path.string() + ": " + files::errno_text(err));
  }
}

}  // namespace

int64_t make_sample_dataset(const SampleSpec& spec) {
  if (spec.out_dir.empty()) throw ConfigError("make-sample: the output folder is empty");
  if (spec.classes < 2)
    throw ConfigError("make-sample: classes must be at least 2 (got " + std::to_string(spec.classes) + ")");
  if (spec.per_class < 1)
    throw ConfigError("make-sample: per_class must be at least 1 (got " + std::to_string(spec.per_class) + ")");
  if (spec.val_per_class < 0)
    throw ConfigError("make-sample: val_per_class must be at least 0 (got " + std::to_string(spec.val_per_class) + ")");
  if (spec.size < 16 || spec.size > 4096)
    throw ConfigError("make-sample: size must be in 16..4096 (got " + std::to_string(spec.size) + ")");
  if (spec.quality < 1 || spec.quality > 100)
    throw ConfigError("make-sample: quality must be in 1..100 (got " + std::to_string(spec.quality) + ")");
  if (!(spec.noise >= 0 && spec.noise <= 100))  // also refuses NaN
    throw ConfigError(strprintf("make-sample: noise must be in 0..100 grey levels (got %g)", spec.noise));
  // A sample, not a copy of ImageNet's 1.3 million images: larger counts are typing mistakes, and the job list alone
  // would take gigabytes before the first image.
  if (spec.classes > kMaxSampleClasses)
    throw ConfigError(strprintf("make-sample: classes must be at most %d (got %d)", kMaxSampleClasses, spec.classes));
  const int64_t images = int64_t{spec.classes} * (int64_t{spec.per_class} + spec.val_per_class);
  if (images > kMaxSampleImages) {
    throw ConfigError(strprintf("make-sample: %lld images (classes x (per_class + val_per_class)); at most %lld",
                                static_cast<long long>(images), static_cast<long long>(kMaxSampleImages)));
  }
  // Into a new or empty folder only: classes of an earlier sample left beside these would mix into the dataset.
  std::error_code ec;
  if (fs::exists(spec.out_dir, ec) && (!fs::is_directory(spec.out_dir, ec) || !fs::is_empty(spec.out_dir, ec))) {
    throw DataError("make-sample: " + spec.out_dir + " is " +
                    (fs::is_directory(spec.out_dir, ec) ? "not empty" : "not a folder") +
                    "; a sample goes into a new or empty folder, so that no other classes mix into it");
  }

  const int height = spec.size;
  const int width = (spec.size * 4 + 1) / 3;  // size * 4 / 3, rounded

  // Every image to write, in a fixed order; the folders first, on this thread.
  struct Job {
    uint64_t split_id;
    int cls;
    int index;
    fs::path path;
  };
  struct Split {
    const char* name;
    int per_class;
    uint64_t id;
  };
  const Split splits[] = {{"train", spec.per_class, 0}, {"val", spec.val_per_class, 1}};
  std::vector<ClassLook> looks;
  for (int c = 0; c < spec.classes; ++c) looks.push_back(class_look(c, spec.classes));
  std::vector<Job> jobs;
  for (const Split& split : splits) {
    if (split.per_class == 0) continue;
    for (int c = 0; c < spec.classes; ++c) {
      const fs::path dir = fs::path(spec.out_dir) / split.name / looks[c].name;
      create_folder(dir);
      for (int i = 0; i < split.per_class; ++i)
        jobs.push_back({split.id, c, i, dir / (looks[c].name + "_" + std::to_string(i) + ".JPEG")});
    }
  }

  // Rendering dominates (a normal draw per pixel and channel): one job at a time per thread, each with its
  // own buffers; the first error stops the others and is rethrown here.
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    cv::Mat mask(height, width, CV_8UC1);
    std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * 3);
    try {
      for (size_t j = next++; j < jobs.size() && !failed; j = next++) {
        const Job& job = jobs[j];
        std::mt19937_64 rng(data::detail::mix_seed(
            {spec.seed, job.split_id, static_cast<uint64_t>(job.cls), static_cast<uint64_t>(job.index)}));
        render_image(looks[job.cls], width, height, spec.noise, rng, mask, pixels);
        write_file(job.path, codecs::encode_jpeg(pixels.data(), width, height, 3, spec.quality));
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      failed = true;
    }
  };
  const int threads = std::clamp(spec.threads > 0 ? spec.threads : usable_cores(), 1,
                                 static_cast<int>(std::max<size_t>(jobs.size(), 1)));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  return static_cast<int64_t>(jobs.size());
}

}  // namespace rn50::samples

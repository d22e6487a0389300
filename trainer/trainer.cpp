// trainer/trainer.cpp: the epoch loop of `rn50 train`: each step's batch from the input source, the step, the step
// records; after each epoch validation, the checkpoint and the epoch record. Everything it uses is built by Session.
#include "trainer/trainer.h"

#include <ATen/ATen.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <functional>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/cost.h"
#include "core/cpu_use.h"
#include "core/errors.h"
#include "core/files.h"
#include "core/launch_env.h"
#include "core/log.h"
#include "core/stop.h"
#include "cuda/cuda_support.h"
#include "data/random_draws.h"
#include "input/source.h"
#include "models/model.h"
#include "monitor/utilisation.h"
#include "parallel/communicator.h"
#include "parallel/distributed.h"
#include "trainer/checkpoint.h"
#include "trainer/executor.h"
#include "trainer/metrics.h"
#include "trainer/optimizer.h"
#include "trainer/progress.h"
#include "trainer/session.h"
#include "trainer/step_timer.h"
#include "trainer/train_step.h"

namespace rn50::trainer {
namespace {

// On an exception out of an epoch, the input source stops using the batches it holds before their loader goes.
class AbandonOnError {
 public:
  explicit AbandonOnError(input::InputSource& source) : source_(source), exceptions_(std::uncaught_exceptions()) {}
  ~AbandonOnError() {
    if (std::uncaught_exceptions() > exceptions_) source_.abandon();
  }
  AbandonOnError(const AbandonOnError&) = delete;
  AbandonOnError& operator=(const AbandonOnError&) = delete;

 private:
  input::InputSource& source_;
  int exceptions_;
};

double peak_host_rss_gib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / (1024.0 * 1024.0);  // ru_maxrss is in KiB
}

class EpochLoop {
 public:
  // local_processes: this run's processes on this host (its ranks here), whose CPU use is the run's, not other work.
  EpochLoop(Session& session, const TrainHooks& hooks, int local_processes)
      : s_(session), loop_(session.loop), hooks_(hooks), local_processes_(local_processes) {
    // A resumed run's best so far is in the records it kept; its checkpoint_best stays unless an epoch beats it.
    if (s_.primary() && (s_.start_epoch > 0 || s_.start_epoch_step > 0)) {
      if (const auto best = best_epoch_in(loop_.out_dir + "/" + kMetricsFile)) {
        best_top1_ = best->top1;
        best_epoch_ = best->epoch;
      }
    }
  }

  // Trains the epochs left; returns where a stop signal ended the run (signal 0: it ran to its end).
  StopPoint run() {
    for (int64_t epoch = s_.start_epoch; epoch < loop_.epochs && !stop_.signal; ++epoch) {
      const auto t0 = Clock::now();
      const int64_t first_step = epoch == s_.start_epoch ? s_.start_epoch_step : 0;
      EpochRecord record = train_epoch(epoch, first_step);
      // Every rank has the same mean loss and the same weights here: all stop alike.
      stop_if_diverged(record.train_loss, epoch, "the epoch");
      warn_if_much_data_lost(record);
      if (epoch == s_.start_epoch) s_.save_plan_cache();  // the choices are made in the first steps
      if (s_.distributed) s_.average_buffers();
      if (stop_.signal) {  // mid-epoch: a checkpoint that resumes at the next step, and the stop's record
        stopped_mid_epoch(epoch, record);
        break;
      }
      if (loop_.validate && s_.source->info().val_images > 0) validate(record);
      s_.beat();
      if (s_.primary()) {
        // What the instance is paid for: the whole epoch with its validation.
        std::optional<RunCost> cost;
        epoch_seconds_.push_back(seconds_since(t0));
        epoch_rates_.push_back(record.images_per_s);
        if (loop_.price_per_hour > 0) {
          cost = run_cost(loop_.price_per_hour, epoch_seconds_, loop_.epochs);
          record.extra.emplace_back("cost_per_epoch", cost->per_epoch);
          record.extra.emplace_back("projected_run_cost", cost->projected_run);
        }
        // The record before the checkpoint: a run killed between the two resumes from the previous checkpoint and
        // drops the record past it, so neither is ever lost alone.
        s_.metrics->write(record);
        log_epoch(record, cost);
        if (loop_.checkpoint) save(epoch + 1, 0);
        keep_if_best(record);
        if (hooks_.epoch_end) hooks_.epoch_end(record.epoch);
      }
      // A stop during validation, or since the epoch's last step (during its checkpoint's write, say): the epoch is
      // whole, its checkpoint written, and the run ends here with the signal's exit code.
      if (stop_.signal || should_stop(/*every_step=*/true)) {
        if (!stop_.signal) stop_.signal = stop::requested();
        stop_.epoch = epoch + 1;
        stop_.epoch_step = 0;
        stop_.global_step = s_.global_step;
        write_stop(record.epoch, s_.source->info().steps_per_epoch, record.wall_s, record.train_loss);
      }
    }
    if (s_.distributed) s_.close_data_parallel();
    if (!stop_.signal && s_.primary()) log_info(summary());
    return stop_;
  }

 private:
  // Steps between the ranks' agreement on a stop under data parallel (through the store, no device work): every rank
  // stops after the same step, and a signal waits at most this many steps.
  static constexpr int64_t kStopAgreementSteps = 20;

  // Whether the run stops now. One process: a stop signal came. Data parallel: every kStopAgreementSteps global
  // steps (or at once with `every_step`, where every rank calls it at the same point) the ranks share their requests.
  bool should_stop(bool every_step = false) {
    if (!s_.distributed) return stop::requested() != 0;
    if (!every_step && s_.global_step % kStopAgreementSteps != 0) return false;
    int signal = 0;
    for (const double r : s_.distributed->all_values("stop", static_cast<double>(stop::requested())))
      signal = std::max(signal, static_cast<int>(r));
    if (signal) stop::request(signal);
    return signal != 0;
  }

  // The epoch's training stopped after `stop_.epoch_step` of its steps: the checkpoint resumes at the next.
  void stopped_mid_epoch(int64_t epoch, const EpochRecord& record) {
    stop_.epoch = epoch;
    stop_.global_step = s_.global_step;
    if (!s_.primary()) return;
    if (loop_.checkpoint) save(epoch, stop_.epoch_step);
    write_stop(record.epoch, stop_.epoch_step, record.wall_s, record.train_loss);
  }

  // The epoch with the best top-1 so far keeps its checkpoint as checkpoint_best.safetensors: a hard link to the
  // checkpoint just written (free; the next epoch's checkpoint replaces the name, not the file), a copy where the file
  // system has no links.
  void keep_if_best(const EpochRecord& record) {
    if (record.top1) last_top1_ = record.top1;
    if (!record.top1 || (best_top1_ && *record.top1 <= *best_top1_)) return;
    best_top1_ = record.top1;
    best_epoch_ = record.epoch;
    if (!loop_.checkpoint) return;
    namespace fs = std::filesystem;
    const fs::path checkpoint = fs::path(loop_.out_dir) / kCheckpointFile, best = fs::path(loop_.out_dir) / kBestCheckpointFile;
    const fs::path staged = files::temporary_path(best.string());
    std::error_code ec;
    fs::remove(staged, ec);
    fs::create_hard_link(checkpoint, staged, ec);
    if (ec) fs::copy_file(checkpoint, staged, fs::copy_options::overwrite_existing, ec);
    if (!ec) fs::rename(staged, best, ec);
    if (ec) log_warn("checkpoint_best.safetensors not written: " + ec.message());
  }

  // The run's last line: epochs, time, the rate, and the best and last top-1.
  std::string summary() const {
    double wall = 0;
    for (const double s : epoch_seconds_) wall += s;
    std::vector<double> rates = epoch_rates_;
    std::sort(rates.begin(), rates.end());
    std::string line = strprintf("finished: %zu epoch%s in %s", epoch_seconds_.size(),
                                 epoch_seconds_.size() == 1 ? "" : "s", format_duration(wall).c_str());
    if (!rates.empty()) line += ", " + format_rate(rates[rates.size() / 2]) + " img/s (median epoch)";
    if (best_top1_) {
      line +=
          strprintf("; best top-1 %.2f%% at epoch %lld", 100 * *best_top1_, static_cast<long long>(best_epoch_)) +
          (loop_.checkpoint ? " (" + std::string(kBestCheckpointFile) + ")" : "") +
          (last_top1_ ? strprintf(", last %.2f%%", 100 * *last_top1_) : "");  // none: no epoch ran (resumed at its end)
    }
    return line + "; " + loop_.out_dir;
  }

  void write_stop(int64_t epoch, int64_t epoch_step, double wall_s, double train_loss) {
    if (!s_.primary()) return;
    StopRecord r;
    r.epoch = epoch;
    r.step = s_.global_step;
    r.epoch_step = epoch_step;
    r.signal = stop::signal_name(stop_.signal);
    r.wall_s = wall_s;
    r.train_loss = train_loss;
    s_.metrics->write(r);
  }

  EpochRecord train_epoch(int64_t epoch, int64_t first_step) {
    if (s_.device.is_cuda()) cuda::reset_peak_memory(s_.device.index());
    input::InputSource& source = *s_.source;
    const int64_t steps = source.info().steps_per_epoch;
    source.begin_epoch(epoch, first_step);
    const AbandonOnError abandon_on_error(source);
    EpochRecord record;
    record.epoch = epoch + 1;
    at::Tensor loss_sum = at::zeros({}, at::TensorOptions(s_.device).dtype(at::kFloat));
    at::Tensor interval_loss = at::zeros_like(loss_sum);
    s_.timer->take_totals();
    if (s_.sampler) s_.sampler->take_epoch_summary();  // drop what was sampled outside training
    const auto t0 = Clock::now();
    const CpuTimes cpu_at_start = read_cpu_times();
    auto interval_start = t0;
    int64_t interval_steps = 0;
    // Host time only: the device may be a few steps behind between the syncs below, never further than its queue.
    std::optional<EpochProgress> progress;
    if (s_.primary()) {
      progress.emplace(epoch + 1, loop_.epochs, steps, s_.global_batch(), mean_epoch_seconds(), t0,
                       stdout_is_terminal() ? std::function<void(const std::vector<std::string>&)>(
                                                  [](const std::vector<std::string>& forms) { set_status_line(forms); })
                                            : nullptr,
                       first_step);
    }
    int64_t done = 0;  // steps of this epoch run by this process
    for (int64_t s = first_step; s < steps; ++s) {
      // The step's own random draws (mixup and cutmix, stochastic depth, dropout) follow (seed, step) alone, as the
      // data's follow (seed, epoch, index): a resumed run draws what the uninterrupted one drew, and a captured step
      // replays with the new seed.
      at::manual_seed(data::detail::mix_seed(
          {static_cast<uint64_t>(loop_.seed), static_cast<uint64_t>(s_.global_step), 0x5eedULL}));
      s_.timer->begin_step();
      source.fill(s_.step->images(), s_.step->labels());
      s_.timer->mark(Phase::kInput);
      const double lr = s_.schedule.at(s_.global_step);
      const at::Tensor& loss = s_.step->run(lr);
      source.after_step();
      s_.beat();
      loss_sum.add_(loss);
      interval_loss.add_(loss);
      ++interval_steps;
      ++s_.global_step;
      ++done;
      record.lr = lr;
      if (progress) progress->step_done(s + 1, Clock::now());
      if (s_.primary() && s_.global_step % loop_.log_every == 0) {
        // The loop's own only sync, every log_every steps, on the rank that logs (source.fill may wait too: that
        // counts as input time). An interval can be shorter than log_every at the start of an epoch, since records
        // follow the global step.
        const double mean_loss = interval_loss.item<double>() / static_cast<double>(interval_steps);
        // One process stops at once; the ranks of a data-parallel run at the epoch's end, together.
        if (!s_.distributed) stop_if_diverged(mean_loss, epoch, "its last steps");
        const double rate = static_cast<double>(interval_steps * s_.global_batch()) / seconds_since(interval_start);
        StepRecord step_record{epoch + 1, s_.global_step, mean_loss, lr, rate};
        step_record.extra =
            s_.sampler ? s_.sampler->take_interval_means() : monitor::UtilisationSampler::unavailable_interval_means();
        s_.metrics->write(step_record);
        log_info(strprintf("epoch %lld step %lld (%lld/%lld) loss %.4f lr %.5f %s img/s, %s",
                           static_cast<long long>(epoch + 1), static_cast<long long>(s_.global_step),
                           static_cast<long long>(s + 1), static_cast<long long>(steps), mean_loss, lr,
                           format_rate(rate).c_str(), progress->time_left(s + 1, Clock::now()).c_str()));
        interval_loss.zero_();
        interval_steps = 0;
        interval_start = Clock::now();
      }
      if (s + 1 < steps && should_stop()) {
        stop_.signal = stop::requested();
        stop_.epoch_step = s + 1;
        break;
      }
    }
    // Other work on the host while the epoch trained (a build, another run): what rn50 compare warns of, measured over
    // the epoch itself rather than from the load average before the run, which a run just ended still holds up.
    record.extra.emplace_back("others_cpu_cores",
                              other_processes_cores(cpu_at_start, read_cpu_times(), local_processes_));
    const input::InputCounts input = source.end_epoch();
    if (s_.distributed) {
      s_.distributed->comm().sum(loss_sum);
      loss_sum.div_(s_.world());
    }
    record.train_loss = done > 0 ? loss_sum.item<double>() / static_cast<double>(done) : 0.0;
    record.wall_s = seconds_since(t0);
    record.steps = done;
    record.resumed_at_step = first_step;
    record.images = done * s_.global_batch();  // all ranks together
    record.images_per_s = static_cast<double>(record.images) / record.wall_s;
    add_input_counts(record, input);
    add_device_counts(record);
    return record;
  }

  // A loss that is not finite is divergence when the weights are not finite either: no later step mends them (a loss
  // scaler skips a step with infinite gradients, not weights already spoilt). Throws before anything is written from
  // them; with finite weights (one batch's infinite loss) it warns, once, and training goes on.
  void stop_if_diverged(double loss, int64_t epoch, const char* over) {
    if (std::isfinite(loss)) return;
    const char* value = std::isnan(loss) ? "nan" : loss > 0 ? "inf" : "-inf";  // printf's "-nan" says nothing more
    std::vector<at::Tensor> finite;
    {
      at::NoGradGuard no_grad;
      for (const at::Tensor& p : s_.model->parameters()) finite.push_back(at::isfinite(p).all());
    }
    if (finite.empty() || at::stack(finite).all().item<bool>()) {
      if (!warned_infinite_loss_)
        log_warn(
            strprintf("the training loss is %s over %s of epoch %lld; the weights "
                      "are finite, so training goes on",
                      value, over, static_cast<long long>(epoch + 1)));
      warned_infinite_loss_ = true;
      return;
    }
    throw DivergedError(strprintf(
        "the loss is %s over %s of epoch %lld (global step %lld) and the weights are no longer finite; the run stops "
        "here, %s (a lower lr or a longer warmup_epochs may help)",
        value, over, static_cast<long long>(epoch + 1), static_cast<long long>(s_.global_step),
        epoch > 0 && loop_.checkpoint ? "its checkpoint of the last finished epoch kept"
                                      : "without writing a checkpoint"));
  }

  // Bad training samples are replaced so that the run goes on, but a run that quietly trains on a fraction of its
  // data (a class folder deleted mid-run once left half the images bad, and the run exited 0) says so each epoch.
  void warn_if_much_data_lost(const EpochRecord& record) const {
    if (!s_.primary() || record.images == 0 || record.bad_samples * 100 <= record.images) return;
    log_warn(
        strprintf("epoch %lld: %lld of its %lld training images (%.1f%%) could not be used and were replaced by "
                  "others (the 'bad sample skipped' lines name them); --strict-data stops at the first",
                  static_cast<long long>(record.epoch), static_cast<long long>(record.bad_samples),
                  static_cast<long long>(record.images),
                  100.0 * static_cast<double>(record.bad_samples) / static_cast<double>(record.images)));
  }

  // The source's waits, skipped samples and own counters; on several ranks every rank's wait and the sum of skips.
  void add_input_counts(EpochRecord& record, const input::InputCounts& input) {
    record.data_wait_s = input.wait_s;
    record.compute_s = record.wall_s - record.data_wait_s;
    record.bad_samples = input.bad_samples;
    for (const auto& item : input.extra) record.extra.push_back(item);
    if (!s_.distributed) return;
    const std::vector<double> waits = s_.distributed->all_values("data_wait", record.data_wait_s);
    for (int r = 0; r < s_.world(); ++r) record.extra.emplace_back(strprintf("data_wait_s_rank%d", r), waits[r]);
    const std::vector<double> bad = s_.distributed->all_values("bad_samples", static_cast<double>(record.bad_samples));
    record.bad_samples = 0;
    for (const double b : bad) record.bad_samples += static_cast<int64_t>(b);
  }

  // Memory peaks, where the steps' time went, and the GPU's utilisation over the epoch.
  void add_device_counts(EpochRecord& record) {
    const bool cuda = s_.device.is_cuda();
    record.peak_gpu_mem_gib = cuda ? cuda::peak_memory_gib(s_.device.index()) : std::nullopt;
    record.peak_host_rss_gib = peak_host_rss_gib();
    const PhaseTimes phases = s_.timer->take_totals();
    for (int p = 0; p < kNumPhases; ++p) {
      // No communication on one process: unavailable, not 0. Under a CUDA graph the all-reduces are inside the
      // replayed forward+backward and not timed apart.
      const bool measured = static_cast<Phase>(p) != Phase::kCommunication || (s_.distributed && !s_.step->graphed());
      record.extra.emplace_back(kPhaseNames[p], measured ? std::optional<double>(phases.total[p]) : std::nullopt);
    }
    // The slowest step's input phase: near input_s, one stall (an epoch's first step, say); far below, a steady cost.
    record.extra.emplace_back("input_slowest_step_s", phases.slowest[static_cast<int>(Phase::kInput)]);
    // Likewise for the gaps between steps: the host late to queue a step, every step or once.
    record.extra.emplace_back("between_steps_slowest_s", phases.slowest[static_cast<int>(Phase::kBetweenSteps)]);
    record.extra.emplace_back("cuda_graph", s_.step->graphed() ? 1.0 : 0.0);
    for (auto& item :
         s_.sampler ? s_.sampler->take_epoch_summary() : monitor::UtilisationSampler::unavailable_summary()) {
      record.extra.push_back(std::move(item));
    }
    record.extra.emplace_back("peak_gpu_reserved_gib",
                              cuda ? cuda::peak_reserved_gib(s_.device.index()) : std::nullopt);
  }

  // Each rank evaluates its share of the validation split; the sums over all ranks make the figures.
  // Thrown out of a validation batch when a stop signal comes (one process: the ranks of a data-parallel run would
  // need a collective to agree, so they validate to the end).
  struct ValidationStopped {};

  void validate(EpochRecord& record) {
    at::Tensor loss = at::zeros({}, at::TensorOptions(s_.device).dtype(at::kFloat));
    at::Tensor top1 = at::zeros_like(loss), top5 = at::zeros_like(loss), counted = at::zeros_like(loss);
    input::InputCounts input;
    try {
      input = s_.source->validate([&](const at::Tensor& x, const at::Tensor& y) {
        if (!s_.distributed && stop::requested()) throw ValidationStopped{};
        const EvalSums sums = s_.step->executor().evaluate(x, y);
        s_.beat();
        loss.add_(sums.loss);
        top1.add_(sums.top1);
        top5.add_(sums.top5);
        counted.add_(sums.images);
      });
    } catch (const ValidationStopped&) {
      stop_.signal = stop::requested();  // the epoch's record goes without validation figures
      return;
    }
    at::Tensor sums =
        at::stack({loss, top1, top5, counted, at::full({}, static_cast<double>(input.bad_samples), loss.options())});
    if (s_.distributed) s_.distributed->comm().sum(sums);
    const at::Tensor host = sums.to(at::kCPU, at::kDouble);
    const double* v = host.data_ptr<double>();
    const auto images = static_cast<int64_t>(v[3]);
    const auto bad = static_cast<int64_t>(v[4]);
    record.val_images = images;
    record.val_bad_samples = bad;
    record.bad_samples += bad;
    if (images == 0) {
      log_warn(
          strprintf("validation: none of the %lld images of val/ could be used (%lld bad); the epoch has no "
                    "validation figures",
                    static_cast<long long>(s_.source->info().val_images), static_cast<long long>(bad)));
      return;
    }
    if (!std::isfinite(v[0])) {
      // Logits that overflow rank nothing: a top-1 from them is chance. Seen with finite weights whose BatchNorm
      // running statistics are far from the batches training normalised (EfficientNet-B0 at batch 2 under 48 px,
      // where its last stages normalise 2 values a channel; torchvision gives the same NaN with those weights).
      log_warn(
          strprintf("validation: the loss is %s (the model's outputs overflow in evaluation mode); epoch %lld has "
                    "no validation figures",
                    std::isnan(v[0]) ? "nan" : "inf", static_cast<long long>(record.epoch)));
      return;
    }
    record.val_loss = v[0] / static_cast<double>(images);
    record.top1 = v[1] / static_cast<double>(images);
    record.top5 = v[2] / static_cast<double>(images);
  }

  void save(int64_t epochs_done, int64_t epoch_step) {
    const input::DatasetInfo& info = s_.source->info();
    CheckpointMeta meta;
    meta.model = loop_.model;
    meta.optimizer = s_.optimizer->name();
    meta.epoch = epochs_done;
    meta.step = s_.global_step;
    meta.seed = loop_.seed;
    meta.classes = info.classes;
    meta.batch_size = loop_.batch_size;
    meta.steps_per_epoch = info.steps_per_epoch;
    meta.epoch_step = epoch_step;
    save_checkpoint(loop_.out_dir + "/" + kCheckpointFile, *s_.model, *s_.optimizer, meta, s_.step->state());
  }

  void log_epoch(const EpochRecord& r, const std::optional<RunCost>& cost) const {
    auto pct = [](const std::optional<double>& x) { return x ? strprintf("%.2f%%", 100.0 * *x) : std::string("-"); };
    // An epoch resumed mid-way: its time, rate and train loss are of the steps after the resume only.
    const std::string part = r.resumed_at_step > 0 ? strprintf(" (resumed at step %lld: its steps after that)",
                                                               static_cast<long long>(r.resumed_at_step))
                                                   : "";
    log_info(strprintf(
        "epoch %lld/%d%s: %.1f s, %s img/s (data wait %.1f s), train loss %.4f, val loss %s, top-1 %s, top-5 %s, "
        "bad samples %lld%s%s",
        static_cast<long long>(r.epoch), loop_.epochs, part.c_str(), r.wall_s, format_rate(r.images_per_s).c_str(),
        r.data_wait_s, r.train_loss, r.val_loss ? strprintf("%.4f", *r.val_loss).c_str() : "-", pct(r.top1).c_str(),
        pct(r.top5).c_str(), static_cast<long long>(r.bad_samples),
        r.val_bad_samples > 0
            ? strprintf(" (%lld in validation, left out of its figures)", static_cast<long long>(r.val_bad_samples))
                  .c_str()
            : "",
        cost
            ? strprintf(", cost %.4g this epoch, projected run cost %.4g", cost->per_epoch, cost->projected_run).c_str()
            : ""));
  }

  double mean_epoch_seconds() const {
    if (epoch_seconds_.empty()) return 0;
    return std::accumulate(epoch_seconds_.begin(), epoch_seconds_.end(), 0.0) /
           static_cast<double>(epoch_seconds_.size());
  }

  bool warned_infinite_loss_ = false;
  Session& s_;
  const LoopOptions& loop_;
  const TrainHooks& hooks_;
  const int local_processes_;
  StopPoint stop_;
  std::vector<double> epoch_seconds_;
  std::vector<double> epoch_rates_;  // images/s of this process's whole epochs
  std::optional<double> best_top1_, last_top1_;
  int64_t best_epoch_ = 0;  // whole epochs of this process, for the cost projection and the time left
};

}  // namespace

StopPoint train(const Config& config, const LaunchEnv& launch, std::unique_ptr<input::InputSource> source,
                const TrainHooks& hooks) {
  Session session(config, launch, std::move(source));
  session.log_start();
  EpochLoop loop(session, hooks, launch.local_world_size > 0 ? launch.local_world_size : launch.world_size);
  if (launch.world_size <= 1) return loop.run();
  try {
    return loop.run();
  } catch (const ConfigError&) {
    throw;
  } catch (const DataError&) {
    throw;
  } catch (const std::exception& e) {
    // A failed collective's message (Gloo, NCCL) does not say why it failed; the usual reason is another rank.
    throw std::runtime_error(
        strprintf("rank %d of %d stopped: %s (in a data-parallel run this usually means another "
                  "rank died or hangs; waits are bounded by dist_timeout_s=%d)",
                  launch.rank, launch.world_size, first_line(e.what()).c_str(), session.loop.dist_timeout_s));
  }
}

StopPoint train(const Config& config, const LaunchEnv& launch, const TrainHooks& hooks) {
  return train(config, launch, nullptr, hooks);
}

}  // namespace rn50::trainer

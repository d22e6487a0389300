// core/stop.h: stopping a run as users and schedulers ask: the first SIGINT or SIGTERM only asks (the epoch loop ends
// the step, checkpoints and reports); a second one stops the process at once, removing the temporary of a write
// that was under way. Works as PID 1 in a container, where SIGTERM has no default action.
#pragma once

#include <stdexcept>
#include <string>

namespace rn50::stop {

// Installs the handlers (idempotent). Before any thread is started, so that every thread inherits the mask. With
// `announce` (one process of a run: rank 0), the first signal says at once that the run stops after the step under
// way (a run whose steps take minutes on a CPU was silent until then, and users pressed Ctrl-C again).
void install_handlers(bool announce = false);
// For a command with no loop that checks requested() (export, infer, report, compare): the first SIGINT or SIGTERM
// removes the temporary of a write under way and exits 128 + signal at once, with one line.
void install_exit_handlers();

// The signal that asked the run to stop (SIGINT or SIGTERM), or 0. A relaxed atomic load: cheap on the hot path.
int requested();

// Asks as the first signal would (tests, and a rank told by another that the run stops).
void request(int signal_number);

// Thrown where a run is stopped before it has anything to checkpoint (waiting for the other ranks): the command exits
// 128 + signal as a run stopped later does, with this one line.
struct StoppedBeforeTraining : std::runtime_error {
  StoppedBeforeTraining(int signal_number, const std::string& what) : std::runtime_error(what), signal(signal_number) {}
  int signal;
};

// "SIGINT", "SIGTERM", or "signal N".
std::string signal_name(int signal_number);

// The file a write is staging now (files::write_atomically's temporary), removed by the second signal's handler
// before it exits: a run stopped at once leaves no half-written temporary. Empty: none. Not thread-safe across
// concurrent writers: the last one set is the one removed.
void set_pending_temporary(const std::string& path);

}  // namespace rn50::stop

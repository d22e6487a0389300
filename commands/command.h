// commands/command.h: the subcommands of the rn50 program, one file each, and what several of them share. Each takes
// its own argv (argv[0] is the subcommand's name) and returns the exit code; errors are thrown to main.cpp's boundary.
#pragma once

#include <string>
#include <vector>

namespace cxxopts {
class Options;
class ParseResult;
}  // namespace cxxopts

namespace rn50::commands {

int train_command(int argc, char** argv);         // commands/train.cpp
int launch_command(int argc, char** argv);        // commands/launch.cpp
int make_sample_command(int argc, char** argv);   // commands/make_sample.cpp
int export_command(int argc, char** argv);        // commands/export.cpp
int infer_command(int argc, char** argv);         // commands/infer.cpp
int doctor_command(int argc, char** argv);        // commands/doctor.cpp
int bench_decode_command(int argc, char** argv);  // commands/bench_decode.cpp
int report_command(int argc, char** argv);        // commands/report_command.cpp
int compare_command(int argc, char** argv);       // commands/compare.cpp

// options.parse with each mistake a ConfigError (exit 2) of one line: an unknown option with the closest known one
// ("unknown option '--batchsize' (did you mean --batch-size?)"), a value an option cannot take (named with its
// option), an argument no option or positional takes (with `hint`, where the command has one to give).
cxxopts::ParseResult parse_options(cxxopts::Options& options, int argc, char** argv, const std::string& hint = "");

// An input folder's path before any work: an existing folder (a ConfigError naming `option` and the reason).
void check_input_folder(const std::string& option, const std::string& path);

// An output file's path before any work (a ConfigError naming `option`): not empty, not a folder, a device, a FIFO or
// a link, in a writable folder, and its staging file (files::temporary_path) none of `inputs`.
void check_output_file(const std::string& option, const std::string& path, const std::vector<std::string>& inputs = {});

// Whether `name` is "cuda" or "cuda:N" (N of at most three digits), as --device takes a GPU.
bool is_cuda_device_name(const std::string& name);

// The GPU index of a device name: N for "cuda:N", 0 otherwise.
inline int gpu_index(const std::string& device) {
  return device.rfind("cuda:", 0) == 0 ? std::stoi(device.substr(5)) : 0;
}

}  // namespace rn50::commands

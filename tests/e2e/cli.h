// tests/e2e/cli.h: what the end-to-end tests share: running the rn50 binary, reading its metrics file, and the Cli
// fixture's temporary folder and generated sample.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace rn50::e2e {

namespace fs = std::filesystem;

struct Result {
  int code = -1;
  std::string output;  // stdout and stderr together
};

// Runs the binary with `args`; `env` (VAR=value ...) is set for that process only.
inline Result rn50(const std::string& args, const std::string& env = "") {
  const std::string command = (env.empty() ? "" : "env " + env + " ") + std::string(RN50_BINARY) + " " + args + " 2>&1";
  Result r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), buffer.size(), pipe)) r.output += buffer.data();
  const int status = ::pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::vector<nlohmann::json> records(const fs::path& metrics, const std::string& type) {
  std::vector<nlohmann::json> out;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["type"] == type) out.push_back(j);
  }
  return out;
}

// The numbers on the rest of the line after `label` in `output`, in order; none when the label is absent.
inline std::vector<double> numbers_after(const std::string& output, const std::string& label) {
  std::vector<double> numbers;
  const size_t at = output.find(label);
  if (at == std::string::npos) return numbers;
  const size_t end = output.find('\n', at);
  const size_t from = at + label.size();
  const std::string rest = output.substr(from, end == std::string::npos ? std::string::npos : end - from);
  for (const char* p = rest.c_str(); *p != '\0';) {
    if (std::isdigit(static_cast<unsigned char>(*p)) == 0) {
      ++p;
      continue;
    }
    char* next = nullptr;
    numbers.push_back(std::strtod(p, &next));
    p = next;
  }
  return numbers;
}

// Starts `sh -c "exec COMMAND"` in a child process; returns its pid.
inline pid_t start_shell(const std::string& command) {
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", ("exec " + command).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

inline std::string read_text(const std::string& file) {
  std::ifstream in(file);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Waits up to `seconds` for `file` to contain `text`.
inline bool wait_for_text(const std::string& file, const std::string& text, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (read_text(file).find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rn50_e2e_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // `rn50 args` exits with 2 (a configuration or data error) and its output names `fragment`.
  static void expect_exit_2_naming(const std::string& args, const std::string& fragment, const std::string& env = "") {
    const Result r = rn50(args, env);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(fragment), std::string::npos) << args << "\n" << r.output;
  }
  void make_sample(const std::string& args) {
    const Result r = rn50("make-sample --out " + path("data") + " " + args);
    ASSERT_EQ(r.code, 0) << r.output;
  }
  fs::path dir_;
};

// A small, fast training configuration on the generated sample: ResNet-50 at 48 px, constant rate.
inline std::string small_run(const std::string& data, const std::string& out) {
  return "train --data-root " + data + " --out-dir " + out +
         " --device cpu --image-size 48 --val-resize 48 --batch-size 16 --workers 2 --warmup-epochs 0"
         " --label-smoothing 0 --lr-schedule step --lr 0.1";
}

}  // namespace rn50::e2e

// tests/core/test_plan_cache.cpp: the plan cache's file: choices kept across instances, another context's or a
// malformed file not used (and replaced), bounds, merging with another process's save, the path from plan_cache, and
// the cache in use.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/plan_cache.h"
#include "tests/support/temp_dir.h"

namespace rn50 {
namespace {

using testing::TempDir;

constexpr char kContext[] = "rn50 0.9.0 (abc), Release; cuDNN 91900 loaded; CUDA driver 13000";
constexpr char kKey[] = "NVIDIA_H200-sm132-cc90/wgrad/f16/x256x64x56x56/w64x64x3x3/s1p1/prologue";

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::vector<std::string> folder_entries(const std::string& path) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(path.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") out.push_back(name);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string header(const std::string& context = kContext) {
  return "rn50 fusion-conv plan cache 1\ncontext " + context + "\n";
}

TEST(PlanCache, ChoicesComeBackFromTheFile) {
  TempDir dir;
  const std::string path = dir.file("cache/rn50/plans.txt");  // folders made on save
  {
    PlanCache cache(path, kContext);
    EXPECT_NE(cache.note().find("none yet"), std::string::npos) << cache.note();
    EXPECT_FALSE(cache.plan(kKey));
    EXPECT_FALSE(cache.prologue_separate(kKey));
    EXPECT_EQ(cache.misses(), 2);
    EXPECT_EQ(cache.save(), "");  // nothing put: nothing written
    EXPECT_FALSE(testing::file_exists(path));
    cache.put_plan(kKey, PlanChoice{2, 23, "1=4,7=-1", 0.4125});
    cache.put_plan("other/key", PlanChoice{0, 5, "none", 1.5});  // an engine without knobs
    cache.put_prologue(kKey, true);
    EXPECT_FALSE(cache.plan(kKey));  // this process's own choices are not looked up: each thread times its own
    EXPECT_EQ(cache.file_choices(), 0U);
    EXPECT_EQ(cache.added(), 3);
    EXPECT_EQ(cache.save(), "");
  }
  // The file and its lock file, no staging file left.
  EXPECT_EQ(folder_entries(dir.file("cache/rn50")), (std::vector<std::string>{"plans.txt", "plans.txt.lock"}));
  PlanCache again(path, kContext);
  EXPECT_NE(again.note().find("2 plans and 1 prologue choices"), std::string::npos) << again.note();
  const auto plan = again.plan(kKey);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->variant, 2);
  EXPECT_EQ(plan->engine, 23);
  EXPECT_EQ(plan->knobs, "1=4,7=-1");
  EXPECT_NEAR(plan->time_ms, 0.4125, 1e-6);
  ASSERT_TRUE(again.plan("other/key"));
  EXPECT_EQ(again.plan("other/key")->knobs, "none");
  EXPECT_EQ(again.file_choices(), 3U);
  EXPECT_EQ(again.prologue_separate(kKey), std::optional<bool>(true));
  EXPECT_EQ(again.hits(), 4);
  EXPECT_EQ(again.misses(), 0);
}

TEST(PlanCache, AnotherContextsFileIsNotUsedAndIsReplaced) {
  TempDir dir;
  const std::string path = dir.file("plans.txt");
  {
    PlanCache cache(path, "cuDNN 90100");
    cache.put_plan(kKey, PlanChoice{0, 7, "1=1", 1.0});
    ASSERT_EQ(cache.save(), "");
  }
  PlanCache cache(path, kContext);
  EXPECT_NE(cache.note().find("another context (cuDNN 90100)"), std::string::npos) << cache.note();
  EXPECT_FALSE(cache.plan(kKey));
  cache.put_prologue(kKey, false);
  ASSERT_EQ(cache.save(), "");
  EXPECT_EQ(read(path), header() + "prologue " + std::string(kKey) + " fused\n");  // the other context's choice gone
}

TEST(PlanCache, MalformedFilesAreNotUsed) {
  TempDir dir;
  const std::string good = "plan " + std::string(kKey) + " 1 23 1=4 0.5\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not a plan cache", "something else\n" + good},
      {"no context", "rn50 fusion-conv plan cache 1\n"},
      {"line 2: no context", "rn50 fusion-conv plan cache 1\n" + good},
      {"line 3: neither", header() + "plan\n"},
      {"line 3: neither", header() + "prologue " + std::string(kKey) + " maybe\n"},
      {"line 3: neither", header() + "plan key with spaces 1 2 - 0.5 extra\n"},
      {"line 4: a malformed plan", header() + good + "plan k 1 -3 - 0.5\n"},            // negative engine
      {"line 3: a malformed plan", header() + "plan k 64 3 - 0.5\n"},                   // variant out of range
      {"line 3: a malformed plan", header() + "plan k 1 3 1=x 0.5\n"},                  // knobs not numbers
      {"line 3: a malformed plan", header() + "plan k 1 3 - nan\n"},                    // time not finite
      {"line 3: a malformed plan", header() + "plan k 1 3 - 1e9\n"},                    // time beyond any kernel's
      {"another context (?[31m", "rn50 fusion-conv plan cache 1\ncontext \x1b[31m\n"},  // quoted, escapes masked
      {"line 3: a malformed plan", header() + "plan k 1 3x - 0.5\n"},                   // trailing characters
      {"longer than 2048", header() + "plan " + std::string(3000, 'k') + " 1 3 - 0.5\n"},
  };
  int n = 0;
  for (const auto& [why, text] : cases) {
    const std::string path = dir.file("case" + std::to_string(n++));
    write(path, text);
    PlanCache cache(path, kContext);
    EXPECT_NE(cache.note().find("not used"), std::string::npos) << why << ": " << cache.note();
    EXPECT_NE(cache.note().find(why), std::string::npos) << why << ": " << cache.note();
    EXPECT_FALSE(cache.plan(kKey)) << why;
  }
  // Within bounds and well formed: used.
  const std::string path = dir.file("good");
  write(path, header() + good + "\n");  // a blank line is neither: refused too
  EXPECT_NE(PlanCache(path, kContext).note().find("line 4"), std::string::npos);
  write(path, header() + good);
  EXPECT_TRUE(PlanCache(path, kContext).plan(kKey));
}

TEST(PlanCache, TooLargeFifosAndFoldersAreNotReadAndDoNotHang) {
  TempDir dir;
  const std::string large = dir.file("large");
  {
    std::ofstream out(large);
    out << header();
    const std::string line = "prologue k" + std::string(100, 'x') + " fused\n";
    for (uint64_t written = 0; written <= kPlanCacheMaxBytes; written += line.size()) out << line;
  }
  PlanCache too_large(large, kContext);
  EXPECT_NE(too_large.note().find("not used"), std::string::npos) << too_large.note();
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  PlanCache from_fifo(fifo, kContext);  // a FIFO with no writer would block a plain open
  EXPECT_NE(from_fifo.note().find("not used"), std::string::npos) << from_fifo.note();
  PlanCache from_folder(dir.path(), kContext);
  EXPECT_NE(from_folder.note().find("not used"), std::string::npos) << from_folder.note();
  from_folder.put_prologue(kKey, true);
  EXPECT_NE(from_folder.save().find("plan cache not saved"), std::string::npos);  // a folder is not replaced
}

TEST(PlanCache, SavesMergeOverAnotherProcesssChoices) {
  TempDir dir;
  const std::string path = dir.file("plans.txt");
  PlanCache first(path, kContext), second(path, kContext);  // both opened before either saved
  first.put_plan("a", PlanChoice{0, 1, "1=1", 1.0});
  first.put_plan("shared", PlanChoice{0, 2, "1=1", 2.0});
  ASSERT_EQ(first.save(), "");
  second.put_plan("b", PlanChoice{1, 3, "1=1", 3.0});
  second.put_plan("shared", PlanChoice{1, 4, "1=1", 4.0});
  second.put_prologue("b", true);
  ASSERT_EQ(second.save(), "");
  PlanCache merged(path, kContext);
  EXPECT_TRUE(merged.used());
  EXPECT_EQ(merged.file_choices(), 4U);
  ASSERT_TRUE(merged.plan("a"));
  ASSERT_TRUE(merged.plan("b"));
  EXPECT_EQ(merged.plan("shared")->engine, 4);  // the later save's own choice wins
  EXPECT_EQ(merged.prologue_separate("b"), std::optional<bool>(true));
}

// Two processes saving one file over and over (the ranks of a data-parallel run): under the lock file each save reads
// the other's last one, so no choice is lost.
// What an instance read at its start does not overwrite what another saved since: only its new choices win.
TEST(PlanCache, AStartingCopyDoesNotOverwriteANewerSave) {
  TempDir dir;
  const std::string path = dir.file("plans.txt");
  write(path, header() + "plan shared 0 1 1=1 1.000000\n");
  PlanCache first(path, kContext), second(path, kContext);
  first.drop_plan("shared");  // found broken, searched again
  first.put_plan("shared", PlanChoice{0, 2, "1=1", 2.0});
  ASSERT_EQ(first.save(), "");
  second.put_plan("b", PlanChoice{0, 3, "1=1", 3.0});
  ASSERT_EQ(second.save(), "");
  PlanCache merged(path, kContext);
  EXPECT_EQ(merged.plan("shared")->engine, 2);  // not second's copy of engine 1
  EXPECT_TRUE(merged.plan("b"));
}

// A prologue kept "fused" is given only with its plan: the fused form may have none where the file was written.
TEST(PlanCache, AFusedPrologueComesOnlyWithItsPlan) {
  TempDir dir;
  const std::string path = dir.file("plans.txt");
  write(path, header() + "plan with-plan 0 1 1=1 1.000000\nprologue with-plan fused\nprologue no-plan fused\n" +
                  "prologue separate-no-plan separate\n");
  PlanCache cache(path, kContext);
  EXPECT_EQ(cache.prologue_separate("with-plan"), std::optional<bool>(false));
  EXPECT_EQ(cache.prologue_separate("no-plan"), std::nullopt);
  EXPECT_EQ(cache.prologue_separate("separate-no-plan"), std::optional<bool>(true));
  EXPECT_EQ(cache.hits(), 2);
  EXPECT_EQ(cache.misses(), 1);
}

TEST(PlanCache, TwoProcessesSavingAtOnceKeepEveryChoice) {
  TempDir dir;
  const std::string path = dir.file("plans.txt");
  const auto save_many = [&path](const std::string& who) {
    PlanCache cache(path, kContext);
    bool ok = true;
    for (int i = 0; i < 60; ++i) {
      cache.put_plan(who + std::to_string(i), PlanChoice{0, i, "1=1", 0.5});
      ok = cache.save().empty() && ok;
    }
    return ok;
  };
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(save_many("child") ? 0 : 1);
  EXPECT_TRUE(save_many("parent"));
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  PlanCache both(path, kContext);
  EXPECT_NE(both.note().find("120 plans"), std::string::npos) << both.note();
}

TEST(PlanCache, ConcurrentPutsAndSavesLeaveAWholeFile) {
  TempDir dir;
  const std::string path = dir.file("plans.txt");
  PlanCache cache(path, kContext);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 50; ++i) {
        cache.put_plan("t" + std::to_string(t) + "/" + std::to_string(i), PlanChoice{t % 4, i, "1=0", 0.25});
        if (i % 10 == 0) {
          EXPECT_EQ(cache.save(), "");
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(cache.save(), "");
  PlanCache reread(path, kContext);
  EXPECT_NE(reread.note().find("200 plans"), std::string::npos) << reread.note();
}

TEST(PlanCache, UnwritableChoicesAreKeptOutAndDroppedChoicesCountAsMisses) {
  TempDir dir;
  const std::string path = dir.file("plans.txt");
  {
    PlanCache cache(path, kContext);
    cache.put_plan("two words", PlanChoice{0, 1, "1=1", 1.0});                             // a key with a space
    cache.put_plan(std::string(kPlanCacheMaxKey + 1, 'k'), PlanChoice{0, 1, "1=1", 1.0});  // too long
    cache.put_plan("bad-knobs", PlanChoice{0, 1, "a=b", 1.0});
    cache.put_plan("no-knobs", PlanChoice{0, 1, "", 1.0});  // ambiguous: the engine's configurations unnamed
    cache.put_plan("no-engine", PlanChoice{0, -1, "1=1", 1.0});
    cache.put_plan("variant", PlanChoice{64, 1, "1=1", 1.0});  // what the reader refuses is not written
    cache.put_plan("nan-time", PlanChoice{0, 1, "1=1", std::nan("")});
    cache.put_plan("long-time", PlanChoice{0, 1, "1=1", 2e6});
    cache.put_plan(kKey, PlanChoice{0, 9, "2=1", 1.0});
    cache.put_prologue("other", false);
    ASSERT_EQ(cache.save(), "");
  }
  EXPECT_EQ(read(path), header() + "plan " + std::string(kKey) + " 0 9 2=1 1.000000\nprologue other fused\n");
  PlanCache cache(path, kContext);
  ASSERT_TRUE(cache.plan(kKey));
  EXPECT_EQ(cache.hits(), 1);
  cache.drop_plan(kKey);  // cuDNN no longer builds it
  EXPECT_EQ(cache.hits(), 0);
  EXPECT_EQ(cache.misses(), 1);
  EXPECT_FALSE(cache.plan(kKey));
  ASSERT_EQ(cache.save(), "");  // gone from the file too, the rest kept
  EXPECT_EQ(read(path), header() + "prologue other fused\n");
}

TEST(PlanCache, AFileTooLargeToReadBackIsNotWritten) {
  TempDir dir;
  const std::string path = dir.file("plans.txt");
  PlanCache cache(path, kContext);
  const std::string knobs = "1=" + std::string(1000, '1');  // about 1.5 KB a line with the key
  for (int i = 0; i < 6000; ++i) {
    cache.put_plan(std::string(500, 'k') + std::to_string(i), PlanChoice{0, 1, knobs, 1.0});
  }
  EXPECT_NE(cache.save().find("more choices than a file may hold"), std::string::npos);
  EXPECT_FALSE(testing::file_exists(path));
}

TEST(PlanCache, PathFromTheSetting) {
  std::map<std::string, std::string> vars;
  const auto env = [&vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  EXPECT_EQ(plan_cache_path("off", env), "");
  EXPECT_EQ(plan_cache_path("/data/plans.txt", env), "/data/plans.txt");
  EXPECT_EQ(plan_cache_path("auto", env), "");  // nowhere to put it
  vars["HOME"] = "/home/u";
  EXPECT_EQ(plan_cache_path("auto", env), "/home/u/.cache/rn50/fusion-conv-plans.txt");
  vars["XDG_CACHE_HOME"] = "";  // set but empty: as unset
  EXPECT_EQ(plan_cache_path("auto", env), "/home/u/.cache/rn50/fusion-conv-plans.txt");
  vars["XDG_CACHE_HOME"] = "/xdg";
  EXPECT_EQ(plan_cache_path("auto", env), "/xdg/rn50/fusion-conv-plans.txt");
  vars["RN50_CACHE_DIR"] = "/shared/rn50";
  EXPECT_EQ(plan_cache_path("auto", env), "/shared/rn50/fusion-conv-plans.txt");
}

TEST(PlanCache, InUseWhileItsScopeLasts) {
  TempDir dir;
  PlanCache outer(dir.file("a"), kContext), inner(dir.file("b"), kContext);
  EXPECT_EQ(current_plan_cache(), nullptr);
  {
    const UsePlanCache use_outer(outer);
    EXPECT_EQ(current_plan_cache(), &outer);
    {
      const UsePlanCache use_inner(inner);
      EXPECT_EQ(current_plan_cache(), &inner);
    }
    EXPECT_EQ(current_plan_cache(), &outer);
  }
  EXPECT_EQ(current_plan_cache(), nullptr);
}

}  // namespace
}  // namespace rn50

// A test that runs the feedtune binary as a user would: a scratch folder of
// its own (named by the process and the test, removed after), Run(ARGS) with
// its output in files there, Write(NAME, TEXT) into it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/common/run_feedtune.h"

namespace feedtune::testing_util {

class CliScratchTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("feedtune-e2e-" + std::to_string(getpid()) + "-" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // `feedtune ARGS`, ARGS as typed in a shell.
  CliResult Run(const std::string& args) { return RunFeedtune(args, dir_); }

  // Writes `text` to the scratch file `name`; its path.
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }

  std::filesystem::path dir_;
};

}  // namespace feedtune::testing_util

// Names what killed a trial's process: a SIGKILL on a box short of memory is
// most often the kernel's OOM killer, and a trial that says only "killed"
// leaves the user guessing whether feedtune, the box or someone else did it.
// OomWatch reads the cgroup's OOM-kill count (results::ReadOomKills) when a
// trial starts; Explain() reads it again and says whether it rose.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "results/fingerprint.h"
#include "tuner/measure/measurer.h"

namespace feedtune::tuner {

class OomWatch {
 public:
  // Reads the count now; `root` as for results::ReadFingerprint ("" = live).
  explicit OomWatch(std::string root = "");

  // Whether the kernel's OOM killer killed a process of this cgroup since the
  // watch began: one sentence, "the kernel's OOM killer did it (...)",
  // "not the kernel's OOM killer (...)" or why it cannot tell.
  std::string Explain() const;

 private:
  std::string root_;
  std::optional<results::OomKills> before_;
};

// True when a trial's error says a process of it died by SIGKILL (the
// loader's, a rank's and a command's wording all name the signal).
bool NamesSigkill(const std::string& error);

// `error`, with "; " + watch.Explain() added when it names a SIGKILL and
// does not say already whether the OOM killer sent it.
std::string WithKillCause(const std::string& error, const OomWatch& watch);

// A measurer whose failed trials name their SIGKILL's cause, for the
// measurers whose processes are not feedtune's loader (a command, a node's
// ranks); it owns the inner one.
class KillNamingMeasurer final : public TrialMeasurer {
 public:
  explicit KillNamingMeasurer(std::unique_ptr<TrialMeasurer> inner) : inner_(std::move(inner)) {}

  results::TrialRecord Measure(const loader::Knobs& knobs) override { return MeasurePlanned(knobs, {}); }
  results::TrialRecord MeasurePlanned(const loader::Knobs& knobs, const TrialPlan& plan) override;
  std::string last_warning() const override { return inner_->last_warning(); }
  std::optional<double> last_cache_resident_fraction() const override {
    return inner_->last_cache_resident_fraction();
  }

 private:
  std::unique_ptr<TrialMeasurer> inner_;
};

}  // namespace feedtune::tuner

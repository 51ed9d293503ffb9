#include "results/observed.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "results/json_form.h"
#include "results/report.h"
#include "results/store.h"
#include "results/verdict.h"

namespace feedtune::results {
namespace {

using Json = nlohmann::ordered_json;


constexpr const char* kFieldsHelp =
    R"(  config              the workload/config name its sweep ran under (required)
  samples_per_s       samples per second the job ran at (required, >= 0)
  input_bound_frac    wait for the batch / step time, 0..1 (required)
  steps               steps observed (required, >= 1)
  knobs               {"batch_size", "num_workers", "pin_memory" (required),
                       "prefetch_factor" (null or >= 1), "persistent_workers",
                       "non_blocking" (null: not known)} as the job's DataLoader had them
  step_s, wait_s      mean step time and mean wait for a batch, seconds (optional)
  started_at, ended_at  ISO 8601 UTC, e.g. 2026-12-02T10:00:00Z (default: now)
  finished            true when the loop ended; false for a periodic write (default false)
  uid                 names the job: a later record with the same uid replaces it
  sweep_run_id        the run the job took its setting from (optional)
  source              what wrote it (default "feedtune observe"))";

const std::set<std::string>& KnownFields() {
  static const std::set<std::string> fields = {
      "config", "samples_per_s", "input_bound_frac", "steps",    "knobs",        "step_s", "wait_s",
      "started_at", "ended_at",  "finished",         "uid",      "sweep_run_id", "source"};
  return fields;
}

const std::set<std::string>& KnownKnobs() {
  static const std::set<std::string> knobs = {"batch_size",      "num_workers",        "pin_memory",
                                              "prefetch_factor", "persistent_workers", "non_blocking"};
  return knobs;
}

[[noreturn]] void Bad(const std::string& field, const std::string& what) {
  throw ObservedError("field '" + field + "': " + what);
}

std::string Shown(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

// A number (finite, within [low, high]) from a required or optional field.
double NumberField(const Json& object, const std::string& field, double low, double high, bool required,
                   const char* what) {
  const auto it = object.find(field);
  if (it == object.end() || it->is_null()) {
    if (required) Bad(field, std::string("missing; give ") + what);
    return std::nan("");
  }
  if (!it->is_number()) Bad(field, Shown(*it) + " is not a number; give " + what);
  const double value = it->get<double>();
  if (!std::isfinite(value) || value < low || value > high) Bad(field, Shown(*it) + " is out of range; give " + what);
  return value;
}

int64_t IntField(const Json& object, const std::string& field, int64_t low, const char* what) {
  const auto it = object.find(field);
  if (it == object.end() || it->is_null()) Bad(field, std::string("missing; give ") + what);
  if (!it->is_number_integer()) Bad(field, Shown(*it) + " is not an integer; give " + what);
  const int64_t value = it->get<int64_t>();
  if (value < low) Bad(field, Shown(*it) + " is out of range; give " + what);
  return value;
}

std::optional<bool> BoolField(const Json& object, const std::string& field, bool required) {
  const auto it = object.find(field);
  if (it == object.end() || it->is_null()) {
    if (required) Bad(field, "missing; give true or false");
    return std::nullopt;
  }
  if (!it->is_boolean()) Bad(field, Shown(*it) + " is not a boolean; give true or false");
  return it->get<bool>();
}

std::string TextField(const Json& object, const std::string& field, bool required, const char* what) {
  const auto it = object.find(field);
  if (it == object.end() || it->is_null()) {
    if (required) Bad(field, std::string("missing; give ") + what);
    return "";
  }
  if (!it->is_string() || it->get<std::string>().empty()) Bad(field, Shown(*it) + " is not " + what);
  return it->get<std::string>();
}

// "2026-12-02T10:00:00Z": the form every timestamp in the file has, so that
// they sort as text (check and merge compare them so).
std::string TimeField(const Json& object, const std::string& field) {
  const std::string text = TextField(object, field, false, "an ISO 8601 UTC time such as 2026-12-02T10:00:00Z");
  if (text.empty()) return text;
  int y, mo, d, h, mi, s;
  char tail = 0;
  if (text.size() != 20 || std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &y, &mo, &d, &h, &mi, &s, &tail) != 7 ||
      tail != 'Z') {
    Bad(field, "'" + text + "' is not an ISO 8601 UTC time; give one such as 2026-12-02T10:00:00Z");
  }
  return text;
}

void CheckNoUnknown(const Json& object, const std::set<std::string>& known, const std::string& prefix) {
  for (const auto& item : object.items()) {
    if (known.count(item.key()) > 0) continue;
    std::string list;
    for (const std::string& name : known) list += (list.empty() ? "" : ", ") + name;
    Bad(prefix + item.key(), "unknown field; the fields are: " + list);
  }
}

loader::Knobs ParseKnobs(const Json& record, std::optional<bool>* non_blocking) {
  const auto it = record.find("knobs");
  if (it == record.end() || !it->is_object()) {
    Bad("knobs", it == record.end() ? "missing; give the DataLoader's {\"batch_size\", \"num_workers\", \"pin_memory\", ...}"
                                    : Shown(*it) + " is not an object of the DataLoader's knobs");
  }
  const Json& k = *it;
  CheckNoUnknown(k, KnownKnobs(), "knobs.");
  loader::Knobs knobs;
  try {
    knobs.batch_size = static_cast<int>(IntField(k, "batch_size", 1, "the batch size, >= 1"));
    knobs.num_workers = static_cast<int>(IntField(k, "num_workers", 0, "the worker count, >= 0"));
    knobs.pin_memory = *BoolField(k, "pin_memory", true);
    knobs.persistent_workers = BoolField(k, "persistent_workers", false).value_or(false);
    // torch leaves prefetch_factor None without workers (and 2 by default with them).
    if (k.contains("prefetch_factor") && !k["prefetch_factor"].is_null()) {
      knobs.prefetch_factor = static_cast<int>(IntField(k, "prefetch_factor", 1, "batches per worker, >= 1, or null"));
    }
    *non_blocking = BoolField(k, "non_blocking", false);
    if (*non_blocking) knobs.non_blocking = **non_blocking;
  } catch (const ObservedError& e) {
    // The knob's name with its object: "field 'num_workers'" -> "field 'knobs.num_workers'".
    throw ObservedError(std::string("field 'knobs.") + (e.what() + 7));
  }
  return knobs;
}

std::string TrueFalse(bool value) { return value ? "true" : "false"; }

std::string Percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f%%", fraction * 100);
  return text;
}

// The knobs that differ, "num_workers 2 (swept 4), pin_memory false (swept true)"; "" when none.
std::string KnobDifferences(const ObservedRecord& o, const loader::Knobs& swept) {
  std::vector<std::string> parts;
  const loader::Knobs& k = o.knobs;
  const auto add = [&parts](const char* name, const std::string& job, const std::string& sweep) {
    if (job != sweep) parts.push_back(std::string(name) + " " + job + " (swept " + sweep + ")");
  };
  add("batch_size", std::to_string(k.batch_size), std::to_string(swept.batch_size));
  add("num_workers", std::to_string(k.num_workers), std::to_string(swept.num_workers));
  add("pin_memory", TrueFalse(k.pin_memory), TrueFalse(swept.pin_memory));
  // Without workers torch ignores these two, so a difference there changes nothing.
  if (k.num_workers > 0 && swept.num_workers > 0) {
    add("prefetch_factor", std::to_string(k.prefetch_factor), std::to_string(swept.prefetch_factor));
    add("persistent_workers", TrueFalse(k.persistent_workers), TrueFalse(swept.persistent_workers));
  }
  if (o.non_blocking) add("non_blocking", TrueFalse(*o.non_blocking), TrueFalse(swept.non_blocking));
  std::string text;
  for (const std::string& part : parts) text += (text.empty() ? "" : ", ") + part;
  return text;
}

std::string Fixed1(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", value);
  return text;
}

// The sweep that stands for the job (see ObservedCheck::sweep_run_id); nullopt when none.
std::optional<RunView> SweepFor(const Store& store, const std::vector<RunRecord>& runs, const ObservedRecord& o) {
  const auto fits = [&o](const RunRecord& run) {
    return run.workload_name == o.workload_name && SameHostAs(run.host, o.host) && run.best_trial_id.has_value();
  };
  if (o.sweep_run_id) {
    for (const RunRecord& run : runs) {
      if (run.id == *o.sweep_run_id && fits(run)) return LoadRunView(store, run.id);
    }
  }
  const RunRecord* latest = nullptr;
  for (const RunRecord& run : runs) {
    if (fits(run) && (latest == nullptr || run.started_at >= latest->started_at)) latest = &run;
  }
  if (latest == nullptr) return std::nullopt;
  return LoadRunView(store, latest->id);
}

ObservedCheck HoldAgainstSweep(const Store& store, const std::vector<RunRecord>& runs, const ObservedRecord& o,
                               double slower_than) {
  ObservedCheck check;
  check.observed = o;
  const std::string who = "host " + o.host.name + ", config " + o.workload_name;
  const std::optional<RunView> sweep = SweepFor(store, runs, o);
  const TrialRecord* best = sweep ? BestTrial(*sweep) : nullptr;
  if (best == nullptr) {
    check.text = who + ": no sweep of this config on this host with a best setting to hold the job against "
                       "(sweep it there, or merge that host's results file)";
    return check;
  }
  check.sweep_run_id = sweep->run.id;
  check.swept = best->knobs;
  check.swept_samples_per_s = best->samples_per_s;
  check.drop = 1 - o.samples_per_s / best->samples_per_s;
  const std::string figures = Fixed1(o.samples_per_s) + " samples/s observed against " +
                              Fixed1(best->samples_per_s) + " swept (run " + std::to_string(sweep->run.id) + "'s best)";
  if (std::isfinite(check.drop) && check.drop > slower_than) {
    check.findings.push_back({"slower", "the job ran " + Percent(check.drop) + " below the swept figure: " + figures +
                                            "; over the " + Percent(slower_than) + " allowed (--slower-than)"});
  }
  const std::string differences = KnobDifferences(o, best->knobs);
  if (std::isfinite(o.input_bound_frac) && o.input_bound_frac >= kInputBoundHigh) {
    check.findings.push_back(
        {"input-bound", "the job is " + Percent(o.input_bound_frac) + " input-bound at " +
                            (differences.empty() ? "the swept setting" : "its own setting") + " (" +
                            InputBoundBand(o.input_bound_frac) + ": the wait for batches is at or over " +
                            Percent(kInputBoundHigh) + " of the step time)"});
  }
  if (!differences.empty()) {
    check.findings.push_back({"knobs", "the observed knobs differ from the swept best: " + differences});
  }
  check.text = who + ": " + figures + " (" +
               (check.drop >= 0 ? Percent(check.drop) + " below" : Percent(-check.drop) + " above") + "), " +
               Percent(o.input_bound_frac) + " input-bound (" + InputBoundBand(o.input_bound_frac) + "), " +
               (differences.empty() ? "knobs as swept" : "knobs differ");
  return check;
}

}  // namespace

const char* ObservedFieldsHelp() { return kFieldsHelp; }

ObservedRecord ParseObserved(const std::string& json_text) {
  Json record;
  try {
    record = Json::parse(json_text);
  } catch (const nlohmann::json::parse_error& e) {
    throw ObservedError(std::string("not JSON: ") + e.what() + "; give one JSON object per line");
  }
  if (!record.is_object()) throw ObservedError("not a JSON object (" + Shown(record) + "); give one object per line");
  CheckNoUnknown(record, KnownFields(), "");
  ObservedRecord o;
  o.workload_name = TextField(record, "config", true, "the config's name as its sweep ran it (a non-empty string)");
  o.samples_per_s = NumberField(record, "samples_per_s", 0, 1e15, true, "samples per second, >= 0");
  o.input_bound_frac =
      NumberField(record, "input_bound_frac", 0, 1, true, "a share: wait for the batch / step time, between 0 and 1");
  o.steps = IntField(record, "steps", 1, "the steps observed, >= 1");
  o.knobs = ParseKnobs(record, &o.non_blocking);
  o.step_s = NumberField(record, "step_s", 0, 1e9, false, "seconds, >= 0");
  o.wait_s = NumberField(record, "wait_s", 0, 1e9, false, "seconds, >= 0");
  if (std::isfinite(o.step_s) && std::isfinite(o.wait_s) && o.wait_s > o.step_s * (1 + 1e-9)) {
    Bad("wait_s", "the wait (" + Fixed1(o.wait_s * 1e3) + " ms) is longer than the step it is part of (" +
                      Fixed1(o.step_s * 1e3) + " ms); the step runs from one batch handed out to the next");
  }
  o.started_at = TimeField(record, "started_at");
  o.ended_at = TimeField(record, "ended_at");
  if (!o.started_at.empty() && !o.ended_at.empty() && o.ended_at < o.started_at) {
    Bad("ended_at", "'" + o.ended_at + "' is before started_at '" + o.started_at + "'");
  }
  o.finished = BoolField(record, "finished", false).value_or(false);
  o.uid = TextField(record, "uid", false, "a non-empty string naming the job");
  if (record.contains("sweep_run_id") && !record["sweep_run_id"].is_null()) {
    o.sweep_run_id = IntField(record, "sweep_run_id", 1, "the run id the setting came from, >= 1, or null");
  }
  o.source = TextField(record, "source", false, "a non-empty string");
  if (o.source.empty()) o.source = "feedtune observe";
  return o;
}

Json ObservedJson(const ObservedRecord& o) {
  return Json{{"id", o.id},
              {"uid", o.uid},
              {"config", o.workload_name},
              {"host", {{"name", o.host.name}, {"hostname", o.host.hostname}, {"machine_id", o.host.machine_id}}},
              {"knobs",
               {{"batch_size", o.knobs.batch_size},
                {"num_workers", o.knobs.num_workers},
                {"pin_memory", o.knobs.pin_memory},
                {"non_blocking", o.non_blocking ? Json(*o.non_blocking) : Json(nullptr)},
                {"prefetch_factor", o.knobs.prefetch_factor},
                {"persistent_workers", o.knobs.persistent_workers}}},
              {"samples_per_s", FigureJson(o.samples_per_s)},
              {"input_bound_frac", FigureJson(o.input_bound_frac)},
              {"band", InputBoundBand(o.input_bound_frac).empty() ? Json(nullptr) : Json(InputBoundBand(o.input_bound_frac))},
              {"step_s", FigureJson(o.step_s)},
              {"wait_s", FigureJson(o.wait_s)},
              {"steps", o.steps},
              {"started_at", o.started_at},
              {"ended_at", o.ended_at},
              {"finished", o.finished},
              {"sweep_run_id", o.sweep_run_id ? Json(*o.sweep_run_id) : Json(nullptr)},
              {"source", o.source}};
}

bool SameHostAs(const HostIdentity& a, const HostIdentity& b) {
  if (!a.machine_id.empty() && !b.machine_id.empty()) return a.machine_id == b.machine_id;
  return !a.hostname.empty() && a.hostname == b.hostname;
}

std::vector<ObservedRecord> ObservedForRun(const Store& store, const RunRecord& run) {
  std::vector<ObservedRecord> rows;
  for (ObservedRecord& o : store.LoadObserved()) {
    if (o.workload_name == run.workload_name && SameHostAs(o.host, run.host)) rows.push_back(std::move(o));
  }
  return rows;
}

std::vector<ObservedCheck> CheckObserved(const Store& store, const std::optional<std::string>& workload,
                                         double slower_than) {
  // The latest write of each host and workload: older jobs are history, the
  // latest says whether the answer holds now.
  std::map<std::pair<std::string, std::string>, ObservedRecord> latest;
  for (ObservedRecord& o : store.LoadObserved()) {
    if (workload && o.workload_name != *workload) continue;
    const auto key = std::make_pair(o.host.Key(), o.workload_name);
    const auto it = latest.find(key);
    if (it == latest.end() || std::tie(o.ended_at, o.id) >= std::tie(it->second.ended_at, it->second.id)) {
      latest[key] = std::move(o);
    }
  }
  const std::vector<RunRecord> runs = store.LoadRuns();
  std::vector<ObservedCheck> checks;
  for (const auto& [key, o] : latest) checks.push_back(HoldAgainstSweep(store, runs, o, slower_than));
  return checks;
}

}  // namespace feedtune::results

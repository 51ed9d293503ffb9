#include "results/layout_report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "results/units.h"

namespace feedtune::results {
namespace {

using Json = nlohmann::ordered_json;
using internal::Attr;
using internal::EscapeHtml;
using internal::ExactNumber;
using internal::Px;
using internal::TableColumn;

// --- Reading the stored answer. A field absent, null or of another type
// reads as not there (NaN, "", the default): the answer of an older or newer
// `feedtune layout` is shown with "-" where it lacks a figure.

// A share of the data still in the page cache after an eviction that
// prints as "0% stayed resident": the read was cold as said.
constexpr double kResidentAsNone = 0.005;

const Json& Field(const Json& j, const char* key) {
  static const Json kNone;
  if (!j.is_object()) return kNone;
  const auto it = j.find(key);
  return it != j.end() ? *it : kNone;
}

double Number(const Json& j, const char* key) {
  const Json& v = Field(j, key);
  return v.is_number() ? v.get<double>() : NAN;
}

std::string Text(const Json& j, const char* key) {
  const Json& v = Field(j, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

bool Flag(const Json& j, const char* key, bool otherwise) {
  const Json& v = Field(j, key);
  return v.is_boolean() ? v.get<bool>() : otherwise;
}

// An empty array where the answer has none, so loops need no check.
const Json& Candidates(const Json& answer) {
  static const Json kEmpty = Json::array();
  const Json& c = Field(answer, "candidates");
  return c.is_array() ? c : kEmpty;
}

const Json* CandidateNamed(const Json& answer, const std::string& name) {
  for (const Json& c : Candidates(answer)) {
    if (Text(c, "name") == name) return &c;
  }
  return nullptr;
}

// A candidate's cold or warm figure as stored: {samples_per_s, ci, num_workers}.
struct Rate {
  double median = NAN;
  double low = NAN;  // the 95% interval
  double high = NAN;
  int workers = -1;  // -1: not stored
};

Rate RateOf(const Json& candidate, const char* which) {
  const Json& stored = Field(candidate, which);
  Rate rate;
  rate.median = Number(stored, "samples_per_s");
  if (const Json& ci = Field(stored, "ci"); ci.is_array() && ci.size() == 2 && ci[0].is_number() && ci[1].is_number()) {
    rate.low = ci[0].get<double>();
    rate.high = ci[1].get<double>();
  }
  if (const double workers = Number(stored, "num_workers"); std::isfinite(workers)) rate.workers = static_cast<int>(workers);
  return rate;
}

// Not measured: every trial failed, or an answer without its cold figure.
bool Measured(const Json& candidate) {
  return Flag(candidate, "measured", true) && std::isfinite(RateOf(candidate, "cold").median);
}

bool IsNamed(const Json& answer, const Json& candidate) {
  const std::string named = Text(answer, "named");
  return !named.empty() && Text(candidate, "name") == named;
}

// --- Cells, shared by the text and the HTML.

std::string WorkersText(int workers) { return workers >= 0 ? std::to_string(workers) : "-"; }

// "1 worker", "4 workers", "- workers".
std::string WorkersCount(int workers) { return WorkersText(workers) + (workers == 1 ? " worker" : " workers"); }

// "15150 (14732-15976)"; without an interval the median alone.
std::string RateText(const Rate& rate) {
  if (!std::isfinite(rate.median)) return "-";
  if (!std::isfinite(rate.low) || !std::isfinite(rate.high)) return Fixed(rate.median, 0);
  return Fixed(rate.median, 0) + " (" + Fixed(rate.low, 0) + "-" + Fixed(rate.high, 0) + ")";
}

// The source itself pays nothing back; null (stored) means never, absent "-".
std::string PaybackText(const Json& candidate) {
  if (Flag(candidate, "as_is", false)) return "source";
  const Json& payback = Field(candidate, "payback_epochs");
  if (payback.is_number()) return Fixed(payback.get<double>(), 1);
  return payback.is_null() && candidate.is_object() && candidate.contains("payback_epochs") ? "never" : "-";
}

std::string BytesText(double bytes) { return std::isfinite(bytes) ? DecimalBytes(bytes) : "-"; }

// An answer measured on an object store (docs/layout.md#on-an-object-store-feedtune-layout-s3):
// its rows have requests in flight per worker and requests per epoch where
// a local one has warm and read amplification.
bool OnStore(const Json& answer) { return Field(answer, "store").is_object(); }

const std::vector<TableColumn>& LayoutColumns(const Json& answer) {
  static const std::vector<TableColumn> kColumns = {
      {"layout", false}, {"workers", true}, {"cold samples/s (95% CI)", true}, {"warm", true}, {"on disk", true},
      {"ampl.", true},   {"convert", true}, {"epoch", true},                   {"payback", true}};
  static const std::vector<TableColumn> kStoreColumns = {
      {"layout", false},        {"workers", true},  {"fc", true},      {"cold samples/s (95% CI)", true},
      {"requests/epoch", true}, {"on store", true}, {"convert", true}, {"epoch", true},
      {"payback", true}};
  return OnStore(answer) ? kStoreColumns : kColumns;
}

// A count as stored ("-" when absent or null: a stream's fetch_concurrency).
std::string CountText(const Json& candidate, const char* key) {
  const double n = Number(candidate, key);
  return std::isfinite(n) ? Fixed(n, 0) : "-";
}

// One row per candidate, as `feedtune layout` prints it: the named one
// starred; a candidate not measured has "-" for every figure and a line of
// its own under the table (LayoutLines).
std::vector<std::vector<std::string>> LayoutRows(const Json& answer) {
  std::vector<std::vector<std::string>> rows;
  for (const Json& c : Candidates(answer)) {
    // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "*" + std::string.
    std::string name(1, IsNamed(answer, c) ? '*' : ' ');
    name += Text(c, "name");
    if (!Measured(c)) {
      std::vector<std::string> row(LayoutColumns(answer).size(), "-");
      row.front() = name;
      rows.push_back(std::move(row));
      continue;
    }
    const Rate cold = RateOf(c, "cold");
    if (OnStore(answer)) {
      rows.push_back({name, WorkersText(cold.workers), CountText(c, "fetch_concurrency"), RateText(cold),
                      CountText(c, "requests_per_epoch"), BytesText(Number(c, "bytes_on_disk")),
                      Flag(c, "as_is", false) ? "-" : Duration(Number(c, "convert_seconds")),
                      Duration(Number(c, "epoch_seconds_cold")), PaybackText(c)});
      continue;
    }
    const double amplification = Number(c, "read_amplification");
    rows.push_back({name, WorkersText(cold.workers), RateText(cold), Fixed(RateOf(c, "warm").median, 0),
                    BytesText(Number(c, "bytes_on_disk")),
                    std::isfinite(amplification) ? Fixed(amplification, 1) + "x" : "-",
                    Flag(c, "as_is", false) ? "-" : Duration(Number(c, "convert_seconds")),
                    Duration(Number(c, "epoch_seconds_cold")), PaybackText(c)});
  }
  return rows;
}

// The answer's why (it starts with the name), else the name alone.
std::string WhyText(const Json& answer) {
  const std::string why = Text(answer, "why");
  const std::string named = Text(answer, "named");
  return !why.empty() ? why : !named.empty() ? named : "-";
}

// Under the table: why the named one, the candidates not measured, and the
// cache notes worth reading (CacheNoteLines, as `feedtune layout` prints them);
// on a store, the local disk's answer, what cold means there and the
// layouts not measured there.
std::vector<std::string> LayoutLines(const Json& answer) {
  std::vector<std::string> lines = {"named: " + WhyText(answer)};
  const Json& store = Field(answer, "store");
  if (const std::string local = Text(store, "local_line"); !local.empty()) lines.push_back(local);
  for (const Json& c : Candidates(answer)) {
    if (Measured(c)) continue;
    const std::string error = Text(c, "error");
    lines.push_back("not measured: " + Text(c, "name") + (error.empty() ? "" : ": " + error));
  }
  for (std::string& line : CacheNoteLines(answer)) lines.push_back(std::move(line));
  if (const std::string cold = Text(store, "cold"); !cold.empty()) lines.push_back(cold);
  if (const Json& left_out = Field(store, "left_out"); left_out.is_array()) {
    for (const Json& line : left_out) {
      if (line.is_string()) lines.push_back("not a candidate: " + line.get<std::string>());
    }
  }
  return lines;
}

// "/data/train.npy (npy, 10000 samples, 295 MB); a sample of 1000 samples (29.5 MB) measured,
// --cpu-us-per-sample 0".
std::string DatasetText(const Json& answer) {
  const Json& dataset = Field(answer, "dataset");
  const Json& sample = Field(answer, "sample");
  const auto count = [](const Json& j) {
    const double n = Number(j, "samples");
    return std::isfinite(n) ? Fixed(n, 0) + " samples" : std::string("- samples");
  };
  const std::string path = Text(dataset, "path");
  const std::string kind = Text(dataset, "kind");
  return (path.empty() ? "-" : path) + " (" + (kind.empty() ? "-" : kind) + ", " + count(dataset) + ", " +
         BytesText(Number(dataset, "bytes")) + "); a sample of " + count(sample) + " (" +
         BytesText(Number(sample, "bytes")) + ") measured, --cpu-us-per-sample " +
         Fixed(Number(answer, "cpu_us_per_sample"), 0);
}

constexpr const char* kExtrapolated =
    "on disk, convert, epoch and payback are for the whole dataset, extrapolated from the sample";
constexpr const char* kExtrapolatedOnStore =
    "requests, on store, convert, epoch and payback are for the whole dataset, extrapolated from the sample; fc: "
    "requests in flight per worker, - for a stream, whose workers are its requests";

const char* ExtrapolatedText(const Json& answer) { return OnStore(answer) ? kExtrapolatedOnStore : kExtrapolated; }

// The machine as the header lines name it; without its record, the hostname the answer kept.
std::string HostText(const RunView& view, const Json& answer) {
  if (view.machine) return internal::MachineText(*view.machine);
  const std::string hostname = Text(Field(answer, "machine"), "hostname");
  return hostname.empty() ? "-" : hostname;
}

std::string DateText(const RunRecord& run) {
  return (run.started_at.empty() ? "-" : run.started_at) + (run.ended_at.empty() ? "" : ", ended " + run.ended_at);
}

// The cold doubling of each candidate from its trials (phase "layout-cold:
// NAME"): a column per worker count, a cell per trial (its samples/s, or its
// status when it failed or a budget refused it). Empty without such trials.
struct Doubling {
  std::vector<TableColumn> columns;
  std::vector<std::vector<std::string>> rows;
};

Doubling DoublingOf(const RunView& view) {
  static constexpr std::string_view kCold = "layout-cold: ";
  std::vector<std::string> names;
  std::map<std::string, std::map<int, std::string>> cells;  // name -> workers -> cell
  std::vector<int> workers;
  for (const TrialRecord& t : view.trials) {
    if (!t.phase.starts_with(kCold)) continue;
    const std::string name = t.phase.substr(kCold.size());
    if (!cells.count(name)) names.push_back(name);
    cells[name][t.knobs.num_workers] =
        t.status == TrialStatus::kOk ? Fixed(t.samples_per_s, 0) : TrialStatusName(t.status);
    workers.push_back(t.knobs.num_workers);
  }
  std::sort(workers.begin(), workers.end());
  workers.erase(std::unique(workers.begin(), workers.end()), workers.end());
  Doubling doubling;
  if (names.empty()) return doubling;
  doubling.columns.push_back({"layout", false});
  for (int w : workers) doubling.columns.push_back({std::to_string(w), true});
  for (const std::string& name : names) {
    std::vector<std::string> row = {name};
    for (int w : workers) row.push_back(cells[name].count(w) ? cells[name][w] : "-");
    doubling.rows.push_back(std::move(row));
  }
  return doubling;
}

constexpr const char* kDoublingTitle =
    "cold samples/s by num_workers (the doubling each layout was measured over; its row above is the best)";

}  // namespace

std::vector<std::string> CacheNoteLines(const Json& answer) {
  std::vector<std::string> lines;
  const Json& notes = Field(answer, "cache_notes");
  if (!notes.is_array()) return lines;
  for (const Json& n : notes) {
    if (n.is_string()) {  // an answer stored before the notes had fields: its words alone
      lines.push_back("note: " + n.get<std::string>());
      continue;
    }
    const Json& resident = Field(n, "resident_fraction");
    if (resident.is_number() && resident.get<double>() < kResidentAsNone) continue;  // cold as said
    lines.push_back("note: " + Text(n, "candidate") + ": " + Text(n, "note"));
  }
  return lines;
}

std::optional<Json> LayoutAnswer(const RunRecord& run) {
  if (run.kind != RunKind::kLayout) return std::nullopt;
  Json answer = Json::parse(run.answer_json, nullptr, /*allow_exceptions=*/false);
  if (answer.is_discarded() || !answer.is_object() || !Field(answer, "candidates").is_array()) return std::nullopt;
  return answer;
}

std::string RenderLayoutTable(const RunView& view, const Json& answer) {
  const RunRecord& run = view.run;
  std::string text = "run:      " + std::to_string(run.id) + " (" + RunStatusName(run.status) + ")" +
                     (run.version.empty() ? "" : ", feedtune " + run.version) + "\n";
  text += "workload: " + run.workload_name + " (hash " + run.workload_hash + ")\n";
  text += "dataset:  " + DatasetText(answer) + "\n\n";
  text += internal::RenderRows(LayoutColumns(answer), LayoutRows(answer)) + "\n";
  for (const std::string& line : LayoutLines(answer)) text += line + "\n";
  text += "(" + std::string(ExtrapolatedText(answer)) + ")\n\n";
  text += "host:     " + HostText(view, answer) + "\n";
  text += "date:     " + DateText(run) + "\n";
  if (const Doubling doubling = DoublingOf(view); !doubling.rows.empty()) {
    text += "\n" + std::string(kDoublingTitle) + ":\n" + internal::RenderRows(doubling.columns, doubling.rows);
  }
  return text;
}

namespace {

// --- The HTML page.

// A table of text cells, numbers right-aligned as in the text; row_classes
// (when given, one per row; "" for none) mark rows.
std::string HtmlTable(const std::string& css_class, const std::vector<TableColumn>& columns,
                      const std::vector<std::vector<std::string>>& rows,
                      const std::vector<std::string>& row_classes = {}) {
  std::string html = "<table" + Attr("class", css_class) + ">\n<thead><tr>";
  for (const TableColumn& c : columns) {
    html += std::string(c.right_aligned ? "<th class=\"n\">" : "<th>") + EscapeHtml(c.header) + "</th>";
  }
  html += "</tr></thead>\n<tbody>\n";
  for (size_t r = 0; r < rows.size(); ++r) {
    const std::string css = r < row_classes.size() ? row_classes[r] : "";
    html += "<tr" + (css.empty() ? std::string() : Attr("class", css)) + ">";
    for (size_t c = 0; c < columns.size(); ++c) {
      html += std::string(columns[c].right_aligned ? "<td class=\"n\">" : "<td>") + EscapeHtml(rows[r][c]) + "</td>";
    }
    html += "</tr>\n";
  }
  return html + "</tbody>\n</table>\n";
}

// The bar chart's frame: names on the left, bars from 0 to the axis's top.
struct BarScale {
  // Room on the right for the figures in words beside the longest bar.
  static constexpr double kLabel = 200, kPlot = 460, kWidth = 900, kRow = 30, kTop = 10, kAxis = 40;
  double top = 1;   // samples/s at the right end
  double step = 1;  // between ticks
  double X(double value) const { return kLabel + kPlot * std::clamp(value / top, 0.0, 1.0); }
};

BarScale MakeBarScale(const Json& answer) {
  double most = 0;
  for (const Json& c : Candidates(answer)) {
    const Rate cold = RateOf(c, "cold");
    for (const double v : {cold.median, cold.high, RateOf(c, "warm").median}) {
      if (std::isfinite(v)) most = std::max(most, v);
    }
  }
  BarScale scale;
  scale.step = internal::NiceStep(most * 1.05, 5);
  scale.top = std::max(scale.step, std::ceil(most * 1.05 / scale.step) * scale.step);
  return scale;
}

// The vertical grid with its tick labels, and the axis's title under them.
std::string BarAxesSvg(const BarScale& s, double plot_bottom) {
  using S = BarScale;
  std::string svg;
  for (double v = 0; v <= s.top + s.step / 2; v += s.step) {
    svg += "<line class=\"grid\" x1=\"" + Px(s.X(v)) + "\" x2=\"" + Px(s.X(v)) + "\" y1=\"" + Px(S::kTop) +
           "\" y2=\"" + Px(plot_bottom) + "\"/>\n<text x=\"" + Px(s.X(v)) + "\" y=\"" + Px(plot_bottom + 16) +
           "\" text-anchor=\"middle\">" + internal::TickLabel(v, s.step) + "</text>\n";
  }
  return svg + "<text x=\"" + Px(S::kLabel + S::kPlot / 2) + "\" y=\"" + Px(plot_bottom + 34) +
         "\" text-anchor=\"middle\">samples/s, cold (warm: &#9670;)</text>\n";
}

// One candidate: its figures as data-* attributes (exact) and a tooltip; the
// bar, the 95% whisker and the warm diamond; the named one green.
std::string BarSvg(const Json& answer, const Json& c, const BarScale& s, double y) {
  using S = BarScale;
  const bool named = IsNamed(answer, c);
  const Rate cold = RateOf(c, "cold"), warm = RateOf(c, "warm");
  const std::string name = Text(c, "name");
  std::string svg = "<g class=\"layout\"" + Attr("data-name", name) + Attr("data-named", named ? "true" : "false") +
                    Attr("data-measured", Measured(c) ? "true" : "false");
  for (const auto& [key, value] : {std::pair{"data-samples-per-s", cold.median}, {"data-ci-low", cold.low},
                                   {"data-ci-high", cold.high}, {"data-warm-samples-per-s", warm.median}}) {
    if (std::isfinite(value)) svg += Attr(key, ExactNumber(value));
  }
  if (cold.workers >= 0) svg += Attr("data-workers", std::to_string(cold.workers));
  svg += ">\n<text x=\"" + Px(S::kLabel - 8) + "\" y=\"" + Px(y + 15) + "\" text-anchor=\"end\"" +
         (named ? " font-weight=\"700\"" : "") + ">" + EscapeHtml(name) + "</text>\n";
  if (!Measured(c)) {
    return svg + "<text x=\"" + Px(S::kLabel + 6) + "\" y=\"" + Px(y + 15) + "\" fill=\"#b42318\">not measured" +
           "</text>\n</g>\n";
  }
  svg += "<title>" + EscapeHtml(name + ": " + RateText(cold) + " samples/s cold (95% CI) at " +
                                WorkersCount(cold.workers) + "; " + Fixed(warm.median, 0) + " warm") +
         "</title>\n";
  const double mid = y + 11;
  svg += "<rect x=\"" + Px(S::kLabel) + "\" y=\"" + Px(y + 4) + "\" width=\"" + Px(s.X(cold.median) - S::kLabel) +
         "\" height=\"14\" fill=\"" + (named ? "#1a7f37" : "#0969da") + "\"/>\n";
  double right = s.X(cold.median);
  if (std::isfinite(cold.low) && std::isfinite(cold.high)) {
    const double x1 = s.X(cold.low), x2 = s.X(cold.high);
    svg += "<path class=\"ci\" stroke=\"#1f2328\" stroke-width=\"1.5\" d=\"M" + Px(x1) + " " + Px(mid) + " H" +
           Px(x2) + " M" + Px(x1) + " " + Px(mid - 5) + " V" + Px(mid + 5) + " M" + Px(x2) + " " + Px(mid - 5) +
           " V" + Px(mid + 5) + "\"/>\n";
    right = std::max(right, x2);
  }
  if (std::isfinite(warm.median)) {
    const double x = s.X(warm.median);
    svg += "<path class=\"warm\" fill=\"#bf8700\" d=\"M" + Px(x) + " " + Px(mid - 6) + " L" + Px(x + 6) + " " +
           Px(mid) + " L" + Px(x) + " " + Px(mid + 6) + " L" + Px(x - 6) + " " + Px(mid) + " Z\"/>\n";
    right = std::max(right, x + 6);
  }
  // Right of every mark, the figures in words: the diamond alone does not say which is which.
  return svg + "<text x=\"" + Px(right + 8) + "\" y=\"" + Px(y + 15) + "\">" + Fixed(cold.median, 0) + " at " +
         WorkersCount(cold.workers) + "; warm " + Fixed(warm.median, 0) + (named ? "; named" : "") + "</text>\n</g>\n";
}

std::string ColdBarsSvg(const Json& answer) {
  using S = BarScale;
  const BarScale scale = MakeBarScale(answer);
  const double plot_bottom = S::kTop + S::kRow * static_cast<double>(Candidates(answer).size());
  const double height = plot_bottom + S::kAxis;
  const std::string title = "cold samples/s per layout, with 95% intervals and the warm figure";
  std::string svg = "<svg class=\"chart layouts\" xmlns=\"http://www.w3.org/2000/svg\"" +
                    Attr("viewBox", "0 0 " + Px(S::kWidth) + " " + Px(height)) + Attr("width", Px(S::kWidth)) +
                    Attr("height", Px(height)) + " role=\"img\"" + Attr("aria-label", title) + ">\n<title>" +
                    EscapeHtml(title) + "</title>\n" + BarAxesSvg(scale, plot_bottom);
  double y = S::kTop;
  for (const Json& c : Candidates(answer)) {
    svg += BarSvg(answer, c, scale, y);
    y += S::kRow;
  }
  return svg + "</svg>\n";
}

// The cards above the chart: the named layout, the source, the dataset.
std::string LayoutCards(const Json& answer) {
  const auto rate_card = [](const char* key, const Json* c) {
    if (c == nullptr || !Measured(*c)) return internal::Card(key, "-", "");
    const Rate cold = RateOf(*c, "cold");
    return internal::Card(key, Text(*c, "name"),
                          Fixed(cold.median, 0) + " samples/s cold at " + WorkersCount(cold.workers));
  };
  const Json* source = nullptr;
  for (const Json& c : Candidates(answer)) {
    if (Flag(c, "as_is", false)) source = &c;
  }
  const Json& dataset = Field(answer, "dataset");
  return "<div class=\"cards\">\n" + rate_card("named", CandidateNamed(answer, Text(answer, "named"))) +
         rate_card("the source as it is", source) +
         internal::Card("dataset", BytesText(Number(dataset, "bytes")),
                        Text(dataset, "kind") + ", " + Fixed(Number(dataset, "samples"), 0) + " samples") +
         "</div>\n";
}

}  // namespace

std::string RenderLayoutHtml(const RunView& view, const Json& answer) {
  const RunRecord& run = view.run;
  const std::string host = view.machine ? (view.machine->label.empty() ? view.machine->hostname : view.machine->label)
                                        : HostText(view, answer);
  std::string body = "<h1>" + EscapeHtml(run.workload_name) + " on " + EscapeHtml(host) + "</h1>\n";
  body += "<p class=\"meta\">feedtune layout, run " + std::to_string(run.id) + " &#183; status " +
          EscapeHtml(RunStatusName(run.status)) + " &#183; workload hash " + EscapeHtml(run.workload_hash) +
          " &#183; " + EscapeHtml(DateText(run)) + "</p>\n<p class=\"meta\">" + EscapeHtml(DatasetText(answer)) +
          "</p>\n";
  body += LayoutCards(answer);
  body += "<h2>Cold samples/s per layout</h2>\n" + ColdBarsSvg(answer) +
          "<p class=\"meta\">Bars: cold samples/s at each layout's best num_workers, with the 95% interval; "
          "&#9670;: warm, the sample in the page cache; green: the layout named.</p>\n";
  const std::vector<std::string> lines = LayoutLines(answer);
  body += "<p><strong>" + EscapeHtml(lines.front()) + "</strong></p>\n";
  body += "<h2>Layouts</h2>\n";
  std::vector<std::string> classes;
  for (const Json& c : Candidates(answer)) classes.push_back(IsNamed(answer, c) ? "named" : "");
  body += "<div class=\"scroll\">\n" + HtmlTable("layouts", LayoutColumns(answer), LayoutRows(answer), classes) + "</div>\n";
  for (size_t i = 1; i < lines.size(); ++i) body += "<p class=\"meta\">" + EscapeHtml(lines[i]) + "</p>\n";
  body += "<p class=\"meta\">" + EscapeHtml(std::string("(") + ExtrapolatedText(answer) + ")") + "</p>\n";
  if (const Doubling doubling = DoublingOf(view); !doubling.rows.empty()) {
    body += "<h2>Cold samples/s by num_workers</h2>\n<p class=\"meta\">" + EscapeHtml(kDoublingTitle) + "</p>\n" +
            HtmlTable("doubling", doubling.columns, doubling.rows);
  }
  if (view.machine) body += "<h2>Machine</h2>\n" + internal::MachineSection(*view.machine);
  body += "<details><summary>The stored answer (JSON)</summary>\n<pre class=\"config\">" +
          EscapeHtml(answer.dump(1, ' ', false, Json::error_handler_t::replace)) + "</pre>\n</details>\n";
  body += "<footer>feedtune " + EscapeHtml(run.version) + " &#183; run uid " + EscapeHtml(run.uid) + "</footer>\n";
  return internal::HtmlPage("feedtune: " + run.workload_name + " on " + host + " (run " + std::to_string(run.id) + ")",
                            body);
}

namespace {

// --- compare: the layouts of several hosts side by side.

// Every candidate of the hosts' answers, each once, in the order the first
// host that has it lists it (a newer build may measure more candidates).
std::vector<std::string> CandidateNames(const std::vector<const CompareRow*>& rows) {
  std::vector<std::string> names;
  for (const CompareRow* row : rows) {
    if (!row->layout) continue;
    for (const Json& c : Candidates(*row->layout)) {
      const std::string name = Text(c, "name");
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  return names;
}

// One host's figure for one candidate.
struct HostCell {
  const Json* candidate = nullptr;  // nullptr: the host's answer has no such candidate (or none at all)
  Rate cold;
  bool named = false;
  bool measured = false;
};

HostCell CellOf(const CompareRow& row, const std::string& name) {
  HostCell cell;
  if (!row.layout || (cell.candidate = CandidateNamed(*row.layout, name)) == nullptr) return cell;
  cell.cold = RateOf(*cell.candidate, "cold");
  cell.named = IsNamed(*row.layout, *cell.candidate);
  cell.measured = Measured(*cell.candidate);
  return cell;
}

// "*18530 at 4": cold samples/s at the host's best workers, starred where it named the layout.
std::string CellText(const HostCell& cell) {
  if (cell.candidate == nullptr) return "-";
  if (!cell.measured) return "not measured";
  std::string text = cell.named ? "*" : "";  // appended: see LayoutRows
  text += Fixed(cell.cold.median, 0) + " at " + WorkersText(cell.cold.workers);
  return text;
}

// What the host named, and why.
std::string HostWhy(const CompareRow& row) {
  return row.host.name + ": " + (row.layout ? WhyText(*row.layout) : "no layout answer stored");
}

// The host's machine, and the run its column is from.
std::string HostRun(const CompareRow& row) {
  return internal::MachineText(row.machine) + " (class " + row.machine_hash + "); run " +
         std::to_string(row.run_id) + " in " + std::filesystem::path(row.db_path).filename().string() + ", " +
         internal::ShortDate(row.date);
}

constexpr const char* kSideBySideLegend =
    "cold samples/s of each layout at the num_workers it was best at, per host; * the layout the host named";

}  // namespace

std::string LayoutSideBySideText(const std::vector<const CompareRow*>& rows) {
  std::vector<TableColumn> columns = {{"layout", false}};
  for (const CompareRow* row : rows) columns.push_back({row->host.name, true});
  std::vector<std::vector<std::string>> cells;
  for (const std::string& name : CandidateNames(rows)) {
    std::vector<std::string> line = {name};
    for (const CompareRow* row : rows) line.push_back(CellText(CellOf(*row, name)));
    cells.push_back(std::move(line));
  }
  std::string text = std::string(kSideBySideLegend) + ":\n\n" + internal::RenderRows(columns, cells) + "\n";
  for (const CompareRow* row : rows) text += HostWhy(*row) + "\n  " + HostRun(*row) + "\n";
  return text;
}

Json LayoutSideBySideJson(const std::vector<const CompareRow*>& rows) {
  Json hosts = Json::array();
  for (const CompareRow* row : rows) {
    const auto answer_field = [&](const char* key) { return row->layout ? Field(*row->layout, key) : Json(); };
    hosts.push_back(Json{{"host", row->host.name},
                         {"machine_hash", row->machine_hash},
                         {"run", Json{{"db", row->db_path}, {"id", row->run_id}, {"uid", row->run_uid}}},
                         {"named", answer_field("named")},
                         {"layout_matters", answer_field("layout_matters")},
                         {"why", answer_field("why")}});
  }
  Json candidates = Json::array();
  for (const std::string& name : CandidateNames(rows)) {
    Json cold = Json::array();
    for (const CompareRow* row : rows) {
      const HostCell cell = CellOf(*row, name);
      cold.push_back(cell.measured ? Field(*cell.candidate, "cold") : Json());
    }
    candidates.push_back(Json{{"name", name}, {"cold", cold}});
  }
  return Json{{"hosts", hosts}, {"candidates", candidates}};
}

std::string LayoutSideBySideHtml(const std::vector<const CompareRow*>& rows) {
  std::string html = "<p class=\"meta\">" + EscapeHtml(kSideBySideLegend) +
                     ".</p>\n<div class=\"scroll\">\n<table class=\"compare layouts\">\n<thead><tr><th "
                     "rowspan=\"2\">layout</th>";
  for (const CompareRow* row : rows) {
    html += "<th colspan=\"2\"" + Attr("data-host", row->host.name) + ">" + EscapeHtml(row->host.name) + "</th>";
  }
  html += "</tr>\n<tr>";
  for (size_t i = 0; i < rows.size(); ++i) html += "<th class=\"n\">workers</th><th class=\"n\">cold samples/s</th>";
  html += "</tr></thead>\n<tbody>\n";
  for (const std::string& name : CandidateNames(rows)) {
    html += "<tr" + Attr("data-layout", name) + "><td>" + EscapeHtml(name) + "</td>";
    for (const CompareRow* row : rows) {
      const HostCell cell = CellOf(*row, name);
      if (!cell.measured) {
        html += "<td class=\"n\">-</td><td class=\"n\">" + EscapeHtml(CellText(cell)) + "</td>";
        continue;
      }
      html += "<td class=\"n\">" + WorkersText(cell.cold.workers) + "</td><td" +
              Attr("class", cell.named ? "n named" : "n") + Attr("data-host", row->host.name) +
              Attr("data-samples-per-s", ExactNumber(cell.cold.median)) +
              Attr("title", "95% CI " + RateText(cell.cold)) + ">" + Fixed(cell.cold.median, 0) + "</td>";
    }
    html += "</tr>\n";
  }
  html += "<tr><th>named</th>";
  for (const CompareRow* row : rows) {
    const std::string named = row->layout ? Text(*row->layout, "named") : "";
    html += "<td colspan=\"2\">" + EscapeHtml(named.empty() ? "-" : named) + "</td>";
  }
  html += "</tr>\n</tbody>\n</table>\n</div>\n<ul class=\"hosts\">\n";
  for (const CompareRow* row : rows) {
    html += "<li><strong>" + EscapeHtml(HostWhy(*row)) + "</strong><br/>" + EscapeHtml(HostRun(*row)) + "</li>\n";
  }
  return html + "</ul>\n";
}

}  // namespace feedtune::results

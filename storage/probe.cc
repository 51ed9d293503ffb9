#include "storage/probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace feedtune::storage {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Linear interpolation between the closest ranks (numpy's default).
double Percentile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double position = q * static_cast<double>(values.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, values.size() - 1);
  return values[below] + (values[above] - values[below]) * (position - static_cast<double>(below));
}

struct Read {
  std::string key;
  std::optional<ByteRange> range;
  int64_t bytes = 0;
};

// Ranges of `range_bytes` spread over one object of `size` bytes.
std::vector<Read> SpreadRanges(const std::string& key, int64_t size, const ProbeOptions& options) {
  const int64_t count = std::clamp<int64_t>(size / std::max<int64_t>(options.range_bytes, 1), 1, options.max_objects);
  std::vector<Read> reads;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t offset = i * (size / count);
    const int64_t length = std::min(options.range_bytes, size - offset);
    reads.push_back({key, ByteRange{offset, length}, length});
  }
  return reads;
}

std::vector<Read> SampleReads(ObjectClient& client, const ProbeOptions& options, std::string* largest_key,
                              int64_t* largest_size) {
  const Location& source = client.source();
  std::vector<ObjectInfo> objects;
  if (source.is_s3()) {
    for (auto& object : client.List(source.prefix, options.max_objects)) {
      if (object.size > 0) objects.push_back(std::move(object));
    }
    if (objects.empty()) {
      throw StorageError(StorageError::Kind::kNotFound,
                         source.ToString() + ": no object with bytes under this prefix; check the prefix (a folder "
                                             "ends with '/')");
    }
  } else {
    objects.push_back(client.Head(""));
    if (objects.front().size == 0) {
      throw StorageError(StorageError::Kind::kNotFound, source.url + ": the object is empty");
    }
  }
  const auto largest = std::max_element(objects.begin(), objects.end(),
                                        [](const ObjectInfo& a, const ObjectInfo& b) { return a.size < b.size; });
  *largest_key = largest->key;
  *largest_size = largest->size;
  if (objects.size() == 1) return SpreadRanges(objects.front().key, objects.front().size, options);
  std::vector<Read> reads;
  for (const auto& object : objects) {
    if (object.size > options.object_bytes_cap) {
      reads.push_back({object.key, ByteRange{0, options.object_bytes_cap}, options.object_bytes_cap});
    } else {
      reads.push_back({object.key, std::nullopt, object.size});
    }
  }
  return reads;
}

std::string Fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

std::string Bytes(int64_t bytes) {
  if (bytes >= (1 << 20)) return Fixed(static_cast<double>(bytes) / (1 << 20), 1) + " MiB";
  if (bytes >= 1000) return Fixed(static_cast<double>(bytes) / 1000, 1) + " KB";
  return std::to_string(bytes) + " B";
}

nlohmann::json OrNull(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace

ProbeResult ProbeStore(ObjectClient& client, const ProbeOptions& options) {
  if (options.in_flight.empty() || options.max_objects < 1 || options.range_bytes < 1 ||
      options.object_bytes_cap < 1 || options.large_read_bytes < 1 || options.budget_s <= 0) {
    throw std::invalid_argument("ProbeStore: options out of range (in_flight levels, sizes and budget are positive)");
  }
  const auto started = Clock::now();
  const auto deadline = started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.budget_s));
  client.TakeStats();
  ProbeResult result;
  result.source = client.source().ToString();
  result.endpoint = client.Describe();
  result.min_gain = options.min_gain;

  std::string largest_key;
  int64_t largest_size = 0;
  const std::vector<Read> reads = SampleReads(client, options, &largest_key, &largest_size);
  result.sample_reads = static_cast<int64_t>(reads.size());
  int64_t total = 0;
  int64_t biggest_read = 0;
  for (const auto& read : reads) {
    total += read.bytes;
    biggest_read = std::max(biggest_read, read.bytes);
  }
  result.bytes_per_read = total / static_cast<int64_t>(reads.size());

  // MB/s on one (kept) connection: a first read of up to 1 MiB says how fast
  // it goes, a second sized to take about a tenth of the budget measures it.
  {
    int64_t size = std::min<int64_t>({largest_size, int64_t{1} << 20, options.large_read_bytes});
    for (int pass = 0; pass < 2; ++pass) {
      const auto start = Clock::now();
      const std::vector<std::byte> bytes = client.Get(largest_key, ByteRange{0, size});
      const double seconds = Since(start);
      const double first_byte = client.stats().first_byte_s.empty() ? 0 : client.stats().first_byte_s.back();
      const double moving = seconds - first_byte;
      if (moving > 0 && !bytes.empty()) {
        result.mb_per_s_per_connection = static_cast<double>(bytes.size()) / moving / 1e6;
        result.large_read_bytes = static_cast<int64_t>(bytes.size());
      }
      const int64_t next = std::min<int64_t>(
          largest_size, std::min<int64_t>(options.large_read_bytes,
                                          static_cast<int64_t>(result.mb_per_s_per_connection.value_or(0) * 1e6 *
                                                               options.budget_s / 10)));
      if (next <= size || Clock::now() >= deadline) break;
      size = next;
    }
  }

  // Objects/s at rising requests in flight.
  std::vector<std::vector<std::byte>> buffers;
  size_t next_read = 0;
  double best_rate = 0;
  for (size_t level = 0; level < options.in_flight.size(); ++level) {
    const int in_flight = options.in_flight[level];
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left <= 0) {
      result.stopped = "the time budget (" + Fixed(options.budget_s, 1) + " s) ended before " +
                       std::to_string(in_flight) + " in flight";
      break;
    }
    // One in flight gives the first-byte figures too: it gets a larger share.
    const double slice = level == 0 ? std::max(left * 0.3, left / static_cast<double>(options.in_flight.size()))
                                    : left / static_cast<double>(options.in_flight.size() - level);
    while (buffers.size() < static_cast<size_t>(in_flight)) buffers.emplace_back(biggest_read);
    auto batch = [&](int count) {
      std::vector<GetRequest> requests;
      for (int i = 0; i < count; ++i) {
        const Read& read = reads[next_read++ % reads.size()];
        requests.push_back({read.key, read.range, buffers[static_cast<size_t>(i % in_flight)]});
      }
      return requests;
    };
    if (in_flight > 1) client.GetMany(batch(in_flight), in_flight);  // opens the new connections, untimed
    const size_t samples_before = client.stats().first_byte_s.size();
    const auto start = Clock::now();
    ConcurrencyPoint point;
    point.in_flight = in_flight;
    int64_t bytes = 0;
    do {
      const auto requests = batch(4 * in_flight);
      for (int64_t written : client.GetMany(requests, in_flight)) bytes += written;
      point.reads += static_cast<int64_t>(requests.size());
    } while (Since(start) < slice && Clock::now() < deadline);
    point.seconds = Since(start);
    point.objects_per_s = static_cast<double>(point.reads) / point.seconds;
    point.mb_per_s = static_cast<double>(bytes) / point.seconds / 1e6;
    result.curve.push_back(point);
    if (level == 0) {
      const auto& all = client.stats().first_byte_s;
      std::vector<double> samples(all.begin() + static_cast<std::ptrdiff_t>(samples_before), all.end());
      if (!samples.empty()) {
        result.first_byte_p50_s = Percentile(samples, 0.50);
        result.first_byte_p99_s = Percentile(samples, 0.99);
        result.first_byte_samples = static_cast<int64_t>(samples.size());
      }
    }
    if (point.objects_per_s > best_rate) result.best_in_flight = in_flight;
    if (level > 0 && point.objects_per_s < best_rate * (1 + options.min_gain)) {
      result.stopped = std::to_string(in_flight) + " in flight gave under " +
                       Fixed(options.min_gain * 100, 0) + "% more than the best before";
      break;
    }
    best_rate = std::max(best_rate, point.objects_per_s);
    if (level + 1 == options.in_flight.size()) {
      result.stopped = "the last level (" + std::to_string(in_flight) + " in flight) still gained";
    }
  }
  double most = 0;
  for (const auto& point : result.curve) most = std::max(most, point.objects_per_s);
  for (const auto& point : result.curve) {
    if (point.objects_per_s * (1 + options.min_gain) >= most) {
      result.knee_in_flight = point.in_flight;
      break;
    }
  }
  const FetchStats stats = client.TakeStats();
  result.requests = stats.requests;
  result.retries = stats.retries();
  result.seconds = Since(started);
  return result;
}

std::string ProbeText(const ProbeResult& r) {
  auto line = [](const std::string& label, const std::string& value) {
    std::string padded = label;
    padded.resize(std::max<size_t>(label.size() + 1, 28), ' ');
    return padded + value + "\n";
  };
  auto ms = [](const std::optional<double>& s) { return s ? Fixed(*s * 1000, 1) + " ms" : std::string("not measured"); };
  std::string text;
  text += line("store", r.endpoint);
  text += line("sample", std::to_string(r.sample_reads) + " reads of " + Bytes(r.bytes_per_read) + " on average");
  text += line("first byte p50", ms(r.first_byte_p50_s) + " (" + std::to_string(r.first_byte_samples) +
                                     " reads, one in flight)");
  text += line("first byte p99", ms(r.first_byte_p99_s));
  text += line("MB/s per connection", r.mb_per_s_per_connection
                                          ? Fixed(*r.mb_per_s_per_connection, 1) + " (one read of " +
                                                Bytes(r.large_read_bytes) + ", first byte excluded)"
                                          : std::string("not measured"));
  for (const auto& point : r.curve) {
    text += line("objects/s at " + std::to_string(point.in_flight) + " in flight",
                 Fixed(point.objects_per_s, 1) + " (" + Fixed(point.mb_per_s, 1) + " MB/s, " +
                     std::to_string(point.reads) + " reads in " + Fixed(point.seconds, 2) + " s)");
  }
  text += line("most objects/s", r.best_in_flight > 0 ? "at " + std::to_string(r.best_in_flight) + " in flight; " +
                                                            r.stopped
                                                      : std::string("not measured"));
  text += line("knee", r.knee_in_flight > 0 ? std::to_string(r.knee_in_flight) +
                                                  " in flight (the fewest within " + Fixed(r.min_gain * 100, 0) + "% of the most)"
                                            : std::string("not measured"));
  text += line("retries", std::to_string(r.retries) + " of " + std::to_string(r.requests) + " requests");
  text += line("probe time", Fixed(r.seconds, 1) + " s");
  return text;
}

nlohmann::json ProbeJson(const ProbeResult& r) {
  nlohmann::json curve = nlohmann::json::array();
  for (const auto& point : r.curve) {
    curve.push_back({{"in_flight", point.in_flight},
                     {"reads", point.reads},
                     {"seconds", point.seconds},
                     {"objects_per_s", point.objects_per_s},
                     {"mb_per_s", point.mb_per_s}});
  }
  return {{"source", r.source},
          {"endpoint", r.endpoint},
          {"sample_reads", r.sample_reads},
          {"bytes_per_read", r.bytes_per_read},
          {"first_byte_p50_s", OrNull(r.first_byte_p50_s)},
          {"first_byte_p99_s", OrNull(r.first_byte_p99_s)},
          {"first_byte_samples", r.first_byte_samples},
          {"mb_per_s_per_connection", OrNull(r.mb_per_s_per_connection)},
          {"large_read_bytes", r.large_read_bytes},
          {"concurrency", curve},
          {"best_in_flight", r.best_in_flight > 0 ? nlohmann::json(r.best_in_flight) : nlohmann::json(nullptr)},
          {"knee_in_flight", r.knee_in_flight > 0 ? nlohmann::json(r.knee_in_flight) : nlohmann::json(nullptr)},
          {"min_gain", r.min_gain},
          {"stopped", r.stopped},
          {"requests", r.requests},
          {"retries", r.retries},
          {"seconds", r.seconds}};
}

}  // namespace feedtune::storage

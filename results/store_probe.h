// The store's probe a remote-data run keeps (RunFacts::store_probe_json,
// written by storage::ProbeJson before the baseline; docs/storage.md#the-probe),
// read back for the report and `compare`. The results room reads the JSON
// by its keys and does not depend on the storage room.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace feedtune::results {

// "s3://bucket/train/: first byte p50 21.3 ms, p99 35.1 ms; 48.2 MB/s per
// connection; objects/s 46 at 1 in flight, 88 at 2, ..., 610 at 32, knee at
// 16; 0 retries". None for an empty or unreadable value.
std::optional<std::string> StoreProbeLine(const std::string& json);
// "first byte 21.3 ms, 48.2 MB/s per connection, knee 16 in flight": compare's cell.
std::optional<std::string> StoreProbeShort(const std::string& json);
// The stored JSON as an object (null when empty or unreadable), for the JSON forms.
nlohmann::json StoreProbeJson(const std::string& json);

}  // namespace feedtune::results

// The store's probe a remote-data run keeps (RunFacts::store_probe_json,
// written by storage::ProbeJson before the baseline; docs/storage.md#the-probe),
// read back for the report and `compare`, and each trial's figures of the
// store (TrialRecord::store). The results room reads the JSON by its keys and
// does not depend on the storage room.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "results/records.h"

namespace feedtune::results {

// "s3://bucket/train/: first byte p50 21.3 ms, p99 35.1 ms; 48.2 MB/s per
// connection; objects/s 46 at 1 in flight, 88 at 2, ..., 610 at 32, knee at
// 16; 0 retries". None for an empty or unreadable value.
std::optional<std::string> StoreProbeLine(const std::string& json);
// "first byte 21.3 ms, 48.2 MB/s per connection, knee 16 in flight": compare's cell.
std::optional<std::string> StoreProbeShort(const std::string& json);
// The stored JSON as an object (null when empty or unreadable), for the JSON forms.
nlohmann::json StoreProbeJson(const std::string& json);

// A trial's figures of the store (TrialRecord::store, schema v23), the same
// figures as the probe's for the store alone:
// "first byte p50 21.3 ms, p99 35.1 ms; 48.2 MB/s per connection; 120
// requests, 2 retries (2 SlowDown)".
std::string StoreFiguresText(const StoreFigures& store);
// Its retries: "2 retries (2 SlowDown)", "0 retries" (compare's, beside the probe).
std::string StoreRetriesText(const StoreFigures& store);
// Their JSON form, as trials.store_json holds it and the report's trials[]
// print it under "store": requests, retries, retries_slowdown,
// retries_server_error, retries_connection, objects, bytes,
// first_byte_p50_s, first_byte_p99_s, mb_per_s_per_connection (null where
// not measured).
nlohmann::ordered_json StoreFiguresJson(const StoreFigures& store);
// Read back from trials.store_json: none for an unreadable value (a damaged
// or newer value must not make a trial unreadable); a missing key reads as
// not measured.
std::optional<StoreFigures> StoreFiguresFromJson(const std::string& json);

}  // namespace feedtune::results

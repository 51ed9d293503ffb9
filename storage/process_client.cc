#include "storage/process_client.h"

#include <unistd.h>

#include <atomic>
#include <memory>

namespace feedtune::storage {

namespace {
std::atomic<uint64_t> next_id{1};
}  // namespace

ProcessClient::ProcessClient(Location source, AwsConfig config)
    : source_(std::move(source)), config_(std::move(config)), id_(next_id++), tally_(std::make_shared<FetchTally>()) {}

ObjectClient& ProcessClient::Get() const {
  struct Mine {
    uint64_t owner = 0;
    pid_t pid = 0;
    std::unique_ptr<ObjectClient> client;
  };
  thread_local Mine mine;
  const pid_t pid = getpid();
  if (mine.owner != id_ || mine.pid != pid || !mine.client) {
    // The parent's client, in a forked child: destroying it closes nothing of the parent's.
    ClientOptions options;
    options.tally = tally_;
    mine.client = std::make_unique<ObjectClient>(source_, config_, options);
    mine.owner = id_;
    mine.pid = pid;
  }
  return *mine.client;
}

std::string ProcessClient::DescribeAccess() const {
  if (!source_.is_s3()) return "plain HTTP(S), unsigned";
  return config_.DescribeKeys() + ", region " + config_.region.value +
         (config_.endpoint_url ? ", endpoint " + config_.endpoint_url->value : "");
}

std::string ColdCacheNote(const Location& source) {
  return "cache cold: nothing of " + source.ToString() +
         " is cached on this box (every read is a GET); the store's own cache is outside the sweep's control";
}

}  // namespace feedtune::storage

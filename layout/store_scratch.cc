#include "layout/store_scratch.h"

#include <stdexcept>
#include <vector>

#include "storage/credentials.h"
#include "storage/location.h"
#include "storage/object_client.h"

namespace feedtune::layout {
namespace {

storage::ObjectClient ClientFor(const storage::Location& at) {
  return storage::ObjectClient(at, storage::ResolveAwsConfig(storage::ProcessEnvironment()));
}

std::string WithoutTrailingSlashes(std::string prefix) {
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  return prefix;
}

}  // namespace

std::string StoreScratchFor(const std::string& scratch, const std::string& source_path) {
  const bool source_on_store = storage::IsRemote(source_path);
  storage::Location source;
  if (source_on_store) source = storage::ParseLocation(source_path);
  std::string text = scratch;
  if (text.empty()) {
    const std::string prefix = WithoutTrailingSlashes(source.prefix);
    if (!source_on_store || prefix.empty()) {
      throw std::invalid_argument("--scratch: " + source_path +
                                  " is a whole bucket, whose listing holds every prefix in it; give --scratch "
                                  "s3://BUCKET/PREFIX/ in another bucket, or name the source's prefix");
    }
    text = "s3://" + source.bucket + "/" + prefix + ".layout-scratch/";
  }
  const storage::Location at = storage::ParseLocation(text);  // throws, naming what is wrong
  if (!at.is_s3()) {
    throw std::invalid_argument("--scratch " + text + ": a web server is read-only; give an s3:// prefix (or a "
                                "local folder for a local dataset)");
  }
  const std::string prefix = WithoutTrailingSlashes(at.prefix);
  if (prefix.empty()) {
    throw std::invalid_argument("--scratch " + text + ": a whole bucket; every object under the scratch is deleted "
                                "at the end, so name a prefix of its own (s3://" + at.bucket + "/layout-scratch/)");
  }
  const std::string normalized = "s3://" + at.bucket + "/" + prefix + "/";
  if (source_on_store && source.bucket == at.bucket) {
    const std::string scratch_prefix = prefix + "/";
    if (scratch_prefix.starts_with(source.prefix)) {
      throw std::invalid_argument("--scratch " + normalized + " is under the source's prefix '" + source.prefix +
                                  "' (S3 lists every key that starts with it, so the candidates would be read as "
                                  "samples): write the source as a folder, " + source.ToString() +
                                  (source.prefix.ends_with('/') ? "" : "/") + ", or give another --scratch");
    }
    if (source.prefix.starts_with(scratch_prefix)) {
      throw std::invalid_argument("--scratch " + normalized + " holds the source " + source.ToString() +
                                  ", and every object under the scratch is deleted at the end; give another --scratch");
    }
  }
  return normalized;
}

void CheckStoreScratchEmpty(const std::string& scratch) {
  const storage::Location at = storage::ParseLocation(scratch);
  storage::ObjectClient client = ClientFor(at);
  const std::vector<storage::ObjectInfo> held = client.List(at.prefix, 1);
  if (!held.empty()) {
    throw std::invalid_argument("--scratch " + scratch + " holds objects (" + client.ObjectName(held.front().key) +
                                "...); layout writes its candidates into an empty prefix and deletes everything "
                                "under it at the end: choose another, or empty it (aws s3 rm --recursive " +
                                scratch + ")");
  }
}

int64_t ClearStoreScratch(const std::string& scratch) {
  const storage::Location at = storage::ParseLocation(scratch);
  storage::ObjectClient client = ClientFor(at);
  int64_t deleted = 0;
  for (const storage::ObjectInfo& object : client.List(at.prefix)) {
    client.Delete(object.key);
    ++deleted;
  }
  return deleted;
}

}  // namespace feedtune::layout

// Destination: where `feedtune convert` puts DST's files (docs/layout.md),
// a local folder or an s3:// prefix, behind one interface so that the
// convert's plan, resume and verification are the same for both:
//
//   local folder   a file is written under its temporary name, synced and
//                  renamed (layout/converted.h)
//   s3://B/P       a shard is written to a local staging file, then put whole
//                  (one PUT, or a multipart upload when it is larger than
//                  part_bytes) and the staging file removed; the small files
//                  (state, index, manifest) are one PUT each. An object is
//                  whole or absent under its key: S3 shows none until its PUT
//                  or its upload's completion returns. A multipart upload's
//                  parts are recorded, as they are sent, in the object
//                  .NAME.upload.json beside it (upload id, part size, each
//                  part's ETag, bytes and CRC32C), so a convert resumed after
//                  kill -9 sends only the parts not recorded, once it has
//                  checked that the shard it wrote again has the same bytes
//                  in each (the CRC32C); a part that differs starts that
//                  shard's upload over.
//
// Files are named relative to DST ("data-00000-of-00004.tar", the index, the
// manifest, the state). Used by one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace feedtune::layout {

// What a Destination did with the data files (the shards), for the summary;
// the small files (state, upload records, index, manifest) are not counted.
struct UploadFigures {
  int64_t objects = 0;        // shards put whole (PUTs and completed uploads)
  int64_t parts_sent = 0;     // multipart parts sent
  int64_t parts_resumed = 0;  // parts an earlier, interrupted run had sent, not sent again
  int64_t bytes_sent = 0;     // bytes of shards sent, in PUT bodies and parts
  int64_t bytes_read_back = 0;  // bytes read back for the verification
};

class Destination {
 public:
  virtual ~Destination() = default;

  // DST as the user wrote it, and one of its files as messages name it.
  virtual const std::string& root() const = 0;
  virtual std::string Name(const std::string& file) const = 0;
  // Whether DST is a store (no free-space question, only tar shards).
  virtual bool remote() const = 0;

  // Every file under DST now (names relative to it), for the checks before
  // a convert starts; a store lists its prefix once.
  virtual std::vector<std::string> Files() = 0;
  virtual bool Exists(const std::string& file) = 0;
  // A whole small file (the state, the manifest); nullopt when absent.
  virtual std::optional<std::string> ReadSmall(const std::string& file) = 0;
  virtual void WriteSmall(const std::string& file, std::string_view bytes) = 0;
  virtual void Remove(const std::string& file) = 0;
  // Removes what an interrupted run left that is never whole (temporary
  // files; a store's staging is fresh each run and its upload records stay).
  virtual void DropPartials() = 0;

  // A large file is written to this local path, then handed over with Commit
  // (which syncs and renames it, or uploads and removes it).
  virtual std::string StagePath(const std::string& file) = 0;
  virtual void Commit(const std::string& file) = 0;
  // A local path holding the file as DST holds it (a store's is read back
  // into staging), for the verification; Release when done with it.
  virtual std::string Fetch(const std::string& file) = 0;
  virtual void Release(const std::string& file) = 0;
  // The bytes DST holds for the file (a folder's: under it).
  virtual int64_t Bytes(const std::string& file) = 0;
  // The last step: DST's own folder synced, so the manifest's rename survives.
  virtual void Sync() = 0;

  virtual UploadFigures figures() const { return {}; }
};

// S3's smallest part (all but the last), and the part size convert uses
// unless told otherwise: the AWS CLI's multipart_chunksize.
inline constexpr int64_t kMinPartBytes = int64_t{5} << 20;
inline constexpr int64_t kDefaultPartBytes = int64_t{8} << 20;

// Where a store's shards are staged unless told: $TMPDIR, else /tmp.
std::string DefaultStagingDir();

// A local folder (created when absent).
std::unique_ptr<Destination> LocalDestination(const std::string& dst);
// An s3:// prefix, reached with the AWS tools' credentials and endpoint
// (storage/credentials.h); staging under `staging_dir` (a fresh folder there,
// removed at the end). Throws std::invalid_argument for a location that is
// not s3:// (an http(s) server is read-only) or part_bytes < kMinPartBytes.
std::unique_ptr<Destination> StoreDestination(const std::string& dst, const std::string& staging_dir,
                                              int64_t part_bytes);

}  // namespace feedtune::layout

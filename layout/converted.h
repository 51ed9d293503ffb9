// What `feedtune convert` leaves in DST (docs/layout.md#what-convert-writes),
// the contract python/feedtune/data.py reads:
//
//   DST/feedtune-dataset.json  the manifest: layout, samples, files, labels,
//                              the source; written last, after verification,
//                              so its presence means DST is whole and checked
//   DST/index.ftmap            the index: a 16-byte header ("FTMAP\0\0\1",
//                              u64 count), then per sample j of DST (source
//                              order, skipped samples left out) 48 bytes,
//                              little-endian: i64 source index, i64 file
//                              (which of the manifest's files), i64 offset
//                              (tar: the payload's byte offset; hdf5, npy,
//                              lmdb: the row), i64 bytes, i64 label (-1:
//                              none), u32 CRC32C of the bytes, u32 zero
//   tar    DST/data-SSSSS-of-NNNNN.tar: WebDataset shards, sample i as the
//          members %09d.EXT (its bytes) and %09d.cls (its label)
//   hdf5   DST/data.h5: /images (N, B) uint8, /labels (N,) int64 when labelled
//   npy    DST/data.npy: (N, B) uint8
//   lmdb   DST/data.lmdb/: value j under key %09d of j, gen-data's meta entry
//   DST/convert-state.json     only while a convert runs or after one was
//                              interrupted: the plan --resume goes on with
//
// Every file is written under a temporary name (a leading dot, ending in
// .partial), synced, renamed and its folder synced (WriteFileAtomically,
// RenameDurably), so a final name always holds a whole file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace feedtune::layout {

inline constexpr const char* kManifestName = "feedtune-dataset.json";
inline constexpr const char* kIndexName = "index.ftmap";
inline constexpr const char* kStateName = "convert-state.json";
inline constexpr const char* kManifestFormat = "feedtune-converted";
inline constexpr int kManifestVersion = 1;

struct IndexRecord {
  int64_t source = 0;
  int64_t file = 0;
  int64_t offset = 0;
  int64_t bytes = 0;
  int64_t label = -1;
  uint32_t crc32c = 0;
};

// The index's bytes, as DST holds them.
std::string IndexBytes(const std::vector<IndexRecord>& records);
// Reads and checks it (magic, size). Throws workloads::DatasetCorrupt naming the file.
std::vector<IndexRecord> ReadIndex(const std::string& path);

// `text` into `path` by a temporary name, fsync, rename, fsync of the folder.
void WriteFileAtomically(const std::string& path, std::string_view text);
// The temporary name a file of DST is written under: DIR/.NAME.partial.
std::string PartialName(const std::string& path);
// Renames `from` to `to` and syncs their folder, so the rename survives a crash.
void RenameDurably(const std::string& from, const std::string& to);
void SyncDirectory(const std::string& dir);

}  // namespace feedtune::layout

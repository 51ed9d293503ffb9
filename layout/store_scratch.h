// The scratch prefix `feedtune layout` writes its candidates to on an object
// store (docs/layout.md#on-an-object-store-feedtune-layout-s3): an s3://
// prefix that must be empty when the layout starts, since every object under
// it is deleted at the end (unless --keep), and that is neither under the
// source's prefix nor above it (a listing of either would hold the other's
// objects).
#pragma once

#include <cstdint>
#include <string>

namespace feedtune::layout {

// The scratch prefix as "s3://bucket/prefix/" (a '/' added, so that it is a
// folder and "x/" never lists "x-other/"): `scratch` as given, or, when it
// is empty, the sibling of an s3:// `source_path`, "s3://bucket/PREFIX.layout-scratch/".
// Throws std::invalid_argument saying what to write instead: a location that
// does not parse or is not s3://, a whole bucket, a prefix under the
// source's or above it (S3 lists every key that starts with a prefix, so
// s3://b/train would list s3://b/train.layout-scratch/).
std::string StoreScratchFor(const std::string& scratch, const std::string& source_path);

// Lists `scratch` (as StoreScratchFor returns it). Throws
// std::invalid_argument when it holds any object, naming one and the fix;
// storage::StorageError when the store refuses the listing.
void CheckStoreScratchEmpty(const std::string& scratch);

// Deletes every object listed under `scratch`, one DELETE each; returns how
// many. Throws storage::StorageError.
int64_t ClearStoreScratch(const std::string& scratch);

}  // namespace feedtune::layout

// CRC32C (Castagnoli, the checksum of iSCSI, ext4 and TFRecord): guards every
// record of a shard file. Uses the SSE4.2 crc32 instruction where the CPU has
// it, else a slicing-by-8 table (built at compile time). Pure; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace feedtune::workloads {

// Extends `crc` (the value of a previous call, or 0 to start) over `data`.
uint32_t Crc32c(std::span<const std::byte> data, uint32_t crc = 0);

// The portable table implementation, exposed so tests can compare both paths.
uint32_t Crc32cPortable(std::span<const std::byte> data, uint32_t crc = 0);

// A checksum as the errors print it: "0x1a2b3c4d".
std::string Hex32(uint32_t v);

}  // namespace feedtune::workloads

#include "workloads/crc32c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace feedtune::workloads {
namespace {

std::vector<std::byte> Bytes(const std::string& s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

// Check values from RFC 3720 (iSCSI), appendix B.4, and the usual "123456789".
TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(Crc32c(Bytes("123456789")), 0xE3069283u);
  EXPECT_EQ(Crc32c(std::vector<std::byte>(32, std::byte{0})), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::vector<std::byte>(32, std::byte{0xFF})), 0x62A8AB43u);
  std::vector<std::byte> ascending(32);
  for (size_t i = 0; i < 32; ++i) ascending[i] = static_cast<std::byte>(i);
  EXPECT_EQ(Crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(Crc32c({}), 0u);
}

TEST(Crc32c, HardwareAndTableAgreeAndExtend) {
  std::vector<std::byte> data(100000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>((i * 2654435761u) >> 11);
  for (size_t len : {0u, 1u, 7u, 8u, 9u, 63u, 4096u, 100000u}) {
    const std::span<const std::byte> part(data.data(), len);
    EXPECT_EQ(Crc32c(part), Crc32cPortable(part)) << len;
  }
  // Extending in pieces gives the checksum of the whole.
  const std::span<const std::byte> all(data);
  EXPECT_EQ(Crc32c(all.subspan(777), Crc32c(all.first(777))), Crc32c(all));
  EXPECT_EQ(Crc32cPortable(all.subspan(5), Crc32cPortable(all.first(5))), Crc32c(all));
}

}  // namespace
}  // namespace feedtune::workloads

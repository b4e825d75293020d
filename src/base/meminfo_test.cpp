// MemAvailable parsing on /proc/meminfo-shaped text, and the probe on this machine.
#include "base/meminfo.h"

#include <gtest/gtest.h>

namespace mx {
namespace {

TEST(Meminfo, ParsesMemAvailableInKilobytes) {
  const char* text =
      "MemTotal:       16314672 kB\n"
      "MemFree:          512340 kB\n"
      "MemAvailable:    9876543 kB\n"
      "Buffers:           12345 kB\n";
  EXPECT_EQ(ParseMemAvailable(text), std::optional<int64_t>(int64_t{9876543} * 1024));
}

TEST(Meminfo, MissingOrMalformedLineIsUnknown) {
  EXPECT_EQ(ParseMemAvailable("MemTotal: 100 kB\nMemFree: 50 kB\n"), std::nullopt);
  EXPECT_EQ(ParseMemAvailable("MemAvailable: lots kB\n"), std::nullopt);
  EXPECT_EQ(ParseMemAvailable("MemAvailable: 100 MB\n"), std::nullopt);
  EXPECT_EQ(ParseMemAvailable(""), std::nullopt);
  // A key that only starts like it is another key.
  EXPECT_EQ(ParseMemAvailable("MemAvailableX: 100 kB\n"), std::nullopt);
}

TEST(Meminfo, ThisMachineReportsSomeMemory) {
  const std::optional<int64_t> b = AvailableMemoryBytes();
  ASSERT_TRUE(b.has_value()) << "/proc/meminfo has no MemAvailable line";
  EXPECT_GT(*b, 0);
}

}  // namespace
}  // namespace mx

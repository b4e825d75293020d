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

TEST(Meminfo, ParsesProcessStatusFields) {
  const char* text =
      "Name:\tmxserve\n"
      "VmPeak:\t  900000 kB\n"
      "VmRSS:\t  123456 kB\n"
      "RssAnon:\t  100000 kB\n"
      "RssFile:\t   23456 kB\n";
  EXPECT_EQ(ParseKbField(text, "VmRSS:"), std::optional<int64_t>(int64_t{123456} * 1024));
  EXPECT_EQ(ParseKbField(text, "RssAnon:"), std::optional<int64_t>(int64_t{100000} * 1024));
  EXPECT_EQ(ParseKbField(text, "VmSwap:"), std::nullopt);
  EXPECT_EQ(ParseKbField("VmRSS:\t-5 kB\n", "VmRSS:"), std::nullopt);
  EXPECT_EQ(ParseKbField("VmRSS:\t12 pages\n", "VmRSS:"), std::nullopt);
}

TEST(Meminfo, ThisProcessHasAResidentSet) {
  const ResidentMemory m = ProcessResidentMemory();
  EXPECT_GT(m.rss, 0);
  EXPECT_GT(m.anon, 0);
  EXPECT_LE(m.anon, m.rss);
}

TEST(Meminfo, ThisMachineReportsSomeMemory) {
  const std::optional<int64_t> b = AvailableMemoryBytes();
  ASSERT_TRUE(b.has_value()) << "/proc/meminfo has no MemAvailable line";
  EXPECT_GT(*b, 0);
}

}  // namespace
}  // namespace mx

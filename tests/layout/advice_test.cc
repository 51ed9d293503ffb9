// layout/advice.h: the named layout (fastest cold, or fewest bytes within its
// noise), the layout that does not matter, and the extrapolations, from
// scripted measurements.
#include "layout/advice.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "layout/source.h"

namespace feedtune::layout {
namespace {

using testing::HasSubstr;

CandidateResult Row(const std::string& name, double median, double low, double high, int64_t bytes,
                    bool as_is = false, double write_s = 1.0) {
  CandidateResult r;
  r.name = name;
  r.as_is = as_is;
  r.cold = {median, low, high, 2};
  r.warm = {median * 2, median * 2, median * 2, 2};
  r.sample_bytes_on_disk = bytes;
  r.write_seconds = write_s;
  return r;
}

TEST(Advise, NamesTheFastestColdWhenNoneIsWithinItsNoise) {
  const auto advice = Advise({Row("as-is", 1000, 950, 1050, 100, true), Row("tar", 3000, 2900, 3100, 110),
                              Row("lmdb", 2000, 1900, 2100, 90)},
                             10000, 1000);
  EXPECT_EQ(advice.named, 1);
  EXPECT_TRUE(advice.layout_matters);
  EXPECT_THAT(advice.why, HasSubstr("tar: the fastest cold, 3000 samples/s (95% CI 2900-3100) at 2 workers"));
  // The whole dataset is ten samples: x10 of the sample's bytes and write.
  EXPECT_EQ(advice.rows[1].bytes_on_disk, 1100);
  EXPECT_DOUBLE_EQ(advice.rows[1].convert_seconds, 10.0);
  EXPECT_DOUBLE_EQ(advice.rows[0].convert_seconds, 0.0);  // the source needs no convert
  // Epochs: 10 s from the source, 10000/3000 s from tar: 10 s of convert pay back after 10 / (10 - 3.33) epochs.
  EXPECT_DOUBLE_EQ(advice.rows[0].epoch_seconds_cold, 10.0);
  ASSERT_TRUE(advice.rows[1].payback_epochs.has_value());
  EXPECT_NEAR(*advice.rows[1].payback_epochs, 10.0 / (10.0 - 10000.0 / 3000.0), 1e-9);
  EXPECT_FALSE(advice.rows[0].payback_epochs.has_value());
  EXPECT_THAT(advice.why, HasSubstr("pays back after 1.5 epochs"));
}

TEST(Advise, NamesTheFewestBytesWithinTheNoiseOfTheFastest) {
  const auto advice = Advise({Row("as-is", 1000, 950, 1050, 100, true), Row("tar", 3000, 2800, 3200, 110),
                              Row("hdf5 gzip", 2900, 2700, 3000, 60), Row("npy", 2500, 2400, 2700, 50)},
                             1000, 1000);
  EXPECT_EQ(advice.named, 2);  // npy has fewer bytes, but its interval ends below tar's
  EXPECT_TRUE(advice.rows[2].within_noise_of_fastest);
  EXPECT_FALSE(advice.rows[3].within_noise_of_fastest);
  EXPECT_THAT(advice.why, HasSubstr("hdf5 gzip: within the noise of the fastest cold (tar, 3000 samples/s"));
  EXPECT_THAT(advice.why, HasSubstr("the fewest bytes on disk of those (0.0 MB against 0.0 MB)"));
}

// A saving under 5% of the fastest's bytes (tar's headers against npy's rows)
// does not name a slower layout within the noise: the fastest stays named.
TEST(Advise, BytesWithinFivePercentOfTheFastestDoNotNameASlowerLayout) {
  const auto advice = Advise({Row("as-is", 100, 95, 105, 1000, true), Row("tar streamed", 11000, 10500, 11600, 1000),
                              Row("npy", 10500, 9800, 10600, 990), Row("hdf5", 9000, 8500, 9500, 900)},
                             1000, 1000);
  EXPECT_EQ(advice.named, 1);
  EXPECT_TRUE(advice.rows[2].within_noise_of_fastest);
  EXPECT_THAT(advice.why, HasSubstr("tar streamed: the fastest cold, 11000 samples/s"));
  EXPECT_THAT(advice.why, HasSubstr("none of the 1 within its noise saves 5% of its bytes"));
}

TEST(Advise, SaysTheLayoutDoesNotMatterWhenEveryCandidateIsWithinTheNoise) {
  const auto advice = Advise({Row("tar", 1010, 900, 1100, 110), Row("as-is", 1000, 950, 1050, 100, true),
                              Row("lmdb", 990, 920, 1060, 120)},
                             5000, 500);
  EXPECT_FALSE(advice.layout_matters);
  EXPECT_EQ(advice.named, 1);
  EXPECT_THAT(advice.why, HasSubstr("the layout does not matter here"));
  EXPECT_THAT(advice.why, HasSubstr("keep the source as it is"));
}

TEST(Advise, ALayoutSlowerThanTheSourceNeverPaysBackAndUnmeasuredRowsAreLeftOut) {
  CandidateResult failed = Row("broken", 0, 0, 0, 10);
  failed.measured = false;
  failed.error = "exit 1";
  const auto advice =
      Advise({Row("as-is", 2000, 1900, 2100, 100, true), Row("lmdb", 500, 450, 550, 90), failed}, 1000, 1000);
  EXPECT_EQ(advice.named, 0);
  EXPECT_FALSE(advice.rows[1].payback_epochs.has_value());
  EXPECT_DOUBLE_EQ(advice.rows[2].epoch_seconds_cold, 0.0);
  EXPECT_THAT(advice.why, HasSubstr("as-is: the fastest cold"));
  const auto none = Advise({failed}, 10, 10);
  EXPECT_EQ(none.named, -1);
  EXPECT_EQ(none.why, "no candidate could be measured");
}

TEST(SpreadIndices, CoversTheWholeDatasetEvenly) {
  EXPECT_EQ(SpreadIndices(10, 5), (std::vector<int64_t>{0, 2, 4, 6, 8}));
  EXPECT_EQ(SpreadIndices(3, 10), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(SpreadIndices(7, 3), (std::vector<int64_t>{0, 2, 4}));
}

}  // namespace
}  // namespace feedtune::layout

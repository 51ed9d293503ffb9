#include "storage/location.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>

namespace feedtune::storage {
namespace {

using ::testing::HasSubstr;

std::string RefusalOf(const std::string& text) {
  try {
    ParseLocation(text);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  ADD_FAILURE() << text << " was accepted";
  return "";
}

TEST(Location, S3BucketAndPrefix) {
  const Location location = ParseLocation("s3://my-data/train/images/");
  EXPECT_TRUE(location.is_s3());
  EXPECT_EQ(location.bucket, "my-data");
  EXPECT_EQ(location.prefix, "train/images/");
  EXPECT_EQ(location.ToString(), "s3://my-data/train/images/");
}

TEST(Location, S3WholeBucket) {
  for (const std::string text : {"s3://bucket.with.dots", "s3://bucket.with.dots/"}) {
    const Location location = ParseLocation(text);
    EXPECT_EQ(location.bucket, "bucket.with.dots");
    EXPECT_EQ(location.prefix, "");
  }
}

TEST(Location, S3KeyKeepsWhatS3Allows) {
  const Location location = ParseLocation("s3://b00/a b/c+d=é/&x");
  EXPECT_EQ(location.prefix, "a b/c+d=é/&x");
}

TEST(Location, HttpUrl) {
  const Location location = ParseLocation("HTTP://Example.COM:8080/Data/shard-0001.tar?X-Amz-Expires=60");
  EXPECT_EQ(location.scheme, Scheme::kHttp);
  EXPECT_EQ(location.url, "http://example.com:8080/Data/shard-0001.tar?X-Amz-Expires=60");
  EXPECT_EQ(ParseLocation("https://[::1]:9000/x.tar").scheme, Scheme::kHttps);
  EXPECT_EQ(ParseLocation("https://host/x.tar").url, "https://host/x.tar");
}

TEST(Location, IsRemote) {
  EXPECT_TRUE(IsRemote("s3://b/x"));
  EXPECT_TRUE(IsRemote("S3://b/x"));
  EXPECT_TRUE(IsRemote("s3:/b/x"));  // malformed, but meant as S3: refused with advice, not looked up as a file
  EXPECT_TRUE(IsRemote("https://host/x"));
  EXPECT_TRUE(IsRemote("gs://bucket/x"));
  EXPECT_FALSE(IsRemote("/data/train"));
  EXPECT_FALSE(IsRemote("data/s3://x"));
  EXPECT_FALSE(IsRemote("./s3:x"));
  EXPECT_FALSE(IsRemote(""));
}

TEST(Location, MalformedS3SaysHowToWriteIt) {
  EXPECT_THAT(RefusalOf("s3:/bucket/x"), HasSubstr("write s3://bucket/x"));
  EXPECT_THAT(RefusalOf("s3:bucket"), HasSubstr("two slashes"));
  EXPECT_THAT(RefusalOf("s3://"), HasSubstr("no bucket"));
  EXPECT_THAT(RefusalOf("s3:///x"), HasSubstr("no bucket"));
  EXPECT_THAT(RefusalOf("s3://My-Bucket/x"), HasSubstr("s3://my-bucket/"));
  EXPECT_THAT(RefusalOf("s3://my_bucket/x"), HasSubstr("only a-z, 0-9, '.' and '-'"));
  EXPECT_THAT(RefusalOf("s3://ab"), HasSubstr("3 to 63"));
  EXPECT_THAT(RefusalOf("s3://" + std::string(64, 'a')), HasSubstr("3 to 63"));
  EXPECT_THAT(RefusalOf("s3://-abc/x"), HasSubstr("begin and end"));
  EXPECT_THAT(RefusalOf("S3://bucket/x"), HasSubstr("lower case: s3://bucket/x"));
  // Every refusal names what was written.
  EXPECT_THAT(RefusalOf("s3://ab"), HasSubstr("'s3://ab'"));
}

TEST(Location, MalformedHttpSaysWhy) {
  EXPECT_THAT(RefusalOf("http:/host/x"), HasSubstr("http://HOST[:PORT]/PATH"));
  EXPECT_THAT(RefusalOf("http:///x"), HasSubstr("no host"));
  EXPECT_THAT(RefusalOf("http://host"), HasSubstr("no file after the host"));
  EXPECT_THAT(RefusalOf("http://host/"), HasSubstr("no file after the host"));
  EXPECT_THAT(RefusalOf("http://host:99999/x"), HasSubstr("1 to 65535"));
  EXPECT_THAT(RefusalOf("http://host:/x"), HasSubstr("not a number"));
  EXPECT_THAT(RefusalOf("http://user:pw@host/x"), HasSubstr("credentials in a URL"));
  EXPECT_THAT(RefusalOf("http://host/a b"), HasSubstr("%20"));
  EXPECT_THAT(RefusalOf("http://host/a#b"), HasSubstr("%23"));
  EXPECT_THAT(RefusalOf("https://[::1/x"), HasSubstr("']' is missing"));
}

TEST(Location, OtherSchemesAreRefusedWithAdvice) {
  EXPECT_THAT(RefusalOf("gs://bucket/x"), HasSubstr("AWS_ENDPOINT_URL=https://storage.googleapis.com"));
  EXPECT_THAT(RefusalOf("gs://bucket/x"), HasSubstr("s3://bucket/x"));
  EXPECT_THAT(RefusalOf("file:///data"), HasSubstr("without file://"));
  EXPECT_THAT(RefusalOf("hdfs://nn/x"), HasSubstr("hdfs:// is not supported"));
  EXPECT_THAT(RefusalOf("/local/path"), HasSubstr("s3://BUCKET/PREFIX or an http(s):// URL"));
}

TEST(Location, PercentEncodeIsRfc3986) {
  EXPECT_EQ(PercentEncode("a-z_A.Z~09", false), "a-z_A.Z~09");
  EXPECT_EQ(PercentEncode("a b+c=d&e/f", false), "a%20b%2Bc%3Dd%26e%2Ff");
  EXPECT_EQ(PercentEncode("a b+c=d&e/f", true), "a%20b%2Bc%3Dd%26e/f");
  EXPECT_EQ(PercentEncode("é", true), "%C3%A9");
  EXPECT_EQ(PercentEncode("*", true), "%2A");
}

}  // namespace
}  // namespace feedtune::storage

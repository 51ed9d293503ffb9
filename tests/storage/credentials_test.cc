#include "storage/credentials.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace feedtune::storage {
namespace {

using ::testing::HasSubstr;

// A HOME of its own with ~/.aws files the test writes.
class Credentials : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "feedtune-credentials-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    home_ = pattern;
    std::filesystem::create_directories(home_ / ".aws");
  }
  void TearDown() override { std::filesystem::remove_all(home_); }

  void Write(const std::filesystem::path& path, const std::string& text) {
    std::ofstream out(path);
    out << text;
  }
  Environment Env(Environment more = {}) {
    more["HOME"] = home_.string();
    return more;
  }
  std::string RefusalOf(const Environment& env) {
    try {
      ResolveAwsConfig(env);
    } catch (const std::invalid_argument& error) {
      return error.what();
    }
    ADD_FAILURE() << "resolved";
    return "";
  }

  std::filesystem::path home_;
};

TEST_F(Credentials, NothingAnywhereMeansUnsignedUsEast1NoEndpoint) {
  const AwsConfig config = ResolveAwsConfig(Env());
  EXPECT_FALSE(config.signed_requests());
  EXPECT_FALSE(config.secret_access_key);
  EXPECT_EQ(config.profile, "default");
  EXPECT_EQ(config.region.value, "us-east-1");
  EXPECT_THAT(config.region.source, HasSubstr("the default"));
  EXPECT_FALSE(config.endpoint_url);
  EXPECT_THAT(config.DescribeKeys(), HasSubstr("unsigned"));
  // Without HOME too.
  EXPECT_FALSE(ResolveAwsConfig({}).signed_requests());
}

TEST_F(Credentials, EnvironmentKeysWinOverTheFiles) {
  Write(home_ / ".aws/credentials", "[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = filesecret\n");
  const AwsConfig config = ResolveAwsConfig(
      Env({{"AWS_ACCESS_KEY_ID", "ENVKEY"}, {"AWS_SECRET_ACCESS_KEY", "envsecret"}, {"AWS_SESSION_TOKEN", "tok"}}));
  ASSERT_TRUE(config.signed_requests());
  EXPECT_EQ(config.access_key_id->value, "ENVKEY");
  EXPECT_EQ(config.access_key_id->source, "AWS_ACCESS_KEY_ID in the environment");
  EXPECT_EQ(config.secret_access_key->value, "envsecret");
  EXPECT_EQ(config.secret_access_key->source, "AWS_SECRET_ACCESS_KEY in the environment");
  EXPECT_EQ(config.session_token->value, "tok");
  EXPECT_EQ(config.session_token->source, "AWS_SESSION_TOKEN in the environment");
  EXPECT_EQ(config.DescribeKeys(),
            "key id ENVKEY from AWS_ACCESS_KEY_ID in the environment, with a session token from AWS_SESSION_TOKEN in "
            "the environment");
}

TEST_F(Credentials, EmptyEnvironmentValuesCountAsUnset) {
  Write(home_ / ".aws/credentials", "[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = filesecret\n");
  const AwsConfig config =
      ResolveAwsConfig(Env({{"AWS_ACCESS_KEY_ID", ""}, {"AWS_SECRET_ACCESS_KEY", ""}, {"AWS_REGION", ""}}));
  EXPECT_EQ(config.access_key_id->value, "FILEKEY");
  EXPECT_EQ(config.region.value, "us-east-1");
}

TEST_F(Credentials, HalfAPairIsRefused) {
  EXPECT_THAT(RefusalOf(Env({{"AWS_ACCESS_KEY_ID", "K"}})),
              HasSubstr("the environment has AWS_ACCESS_KEY_ID but not AWS_SECRET_ACCESS_KEY"));
  EXPECT_THAT(RefusalOf(Env({{"AWS_SECRET_ACCESS_KEY", "S"}})),
              HasSubstr("the environment has AWS_SECRET_ACCESS_KEY but not AWS_ACCESS_KEY_ID"));
  Write(home_ / ".aws/credentials", "[default]\naws_access_key_id = K\n");
  EXPECT_THAT(RefusalOf(Env()), HasSubstr("~/.aws/credentials [default] has aws_access_key_id but not"));
}

TEST_F(Credentials, SharedCredentialsFileProfileFromAwsProfile) {
  Write(home_ / ".aws/credentials",
        "# keys\n[default]\naws_access_key_id = DEFKEY\naws_secret_access_key = defsecret\n\n"
        "[ci]\r\nAWS_ACCESS_KEY_ID=CIKEY\r\naws_secret_access_key =  ci/secret+x= \r\n"
        "aws_session_token = citoken\r\n; a comment\r\n");
  const AwsConfig def = ResolveAwsConfig(Env());
  EXPECT_EQ(def.access_key_id->value, "DEFKEY");
  EXPECT_EQ(def.access_key_id->source, "~/.aws/credentials [default]");
  EXPECT_FALSE(def.session_token);

  const AwsConfig ci = ResolveAwsConfig(Env({{"AWS_PROFILE", "ci"}}));
  EXPECT_EQ(ci.profile, "ci");
  EXPECT_EQ(ci.access_key_id->value, "CIKEY");
  EXPECT_EQ(ci.access_key_id->source, "~/.aws/credentials [ci]");
  EXPECT_EQ(ci.secret_access_key->value, "ci/secret+x=");
  EXPECT_EQ(ci.session_token->value, "citoken");
  EXPECT_EQ(ci.session_token->source, "~/.aws/credentials [ci]");
  // The older name of the variable.
  EXPECT_EQ(ResolveAwsConfig(Env({{"AWS_DEFAULT_PROFILE", "ci"}})).access_key_id->value, "CIKEY");
}

TEST_F(Credentials, FilesNamedByTheEnvironment) {
  const auto dir = home_ / "elsewhere";
  std::filesystem::create_directories(dir);
  Write(dir / "creds", "[default]\naws_access_key_id = OTHER\naws_secret_access_key = s\n");
  Write(dir / "conf", "[default]\nregion = ap-south-1\n");
  const AwsConfig config = ResolveAwsConfig(Env({{"AWS_SHARED_CREDENTIALS_FILE", (dir / "creds").string()},
                                                 {"AWS_CONFIG_FILE", "~/elsewhere/conf"}}));
  EXPECT_EQ(config.access_key_id->value, "OTHER");
  EXPECT_EQ(config.access_key_id->source, (dir / "creds").string() + " (AWS_SHARED_CREDENTIALS_FILE) [default]");
  EXPECT_EQ(config.region.value, "ap-south-1");
  EXPECT_EQ(config.region.source, "~/elsewhere/conf (AWS_CONFIG_FILE) [default]");
}

TEST_F(Credentials, ConfigFileKeysComeAfterTheCredentialsFile) {
  Write(home_ / ".aws/config", "[profile ci]\naws_access_key_id = CONFKEY\naws_secret_access_key = confsecret\n");
  const AwsConfig config = ResolveAwsConfig(Env({{"AWS_PROFILE", "ci"}}));
  EXPECT_EQ(config.access_key_id->value, "CONFKEY");
  EXPECT_EQ(config.access_key_id->source, "~/.aws/config [profile ci]");
  Write(home_ / ".aws/credentials", "[ci]\naws_access_key_id = CREDKEY\naws_secret_access_key = credsecret\n");
  EXPECT_EQ(ResolveAwsConfig(Env({{"AWS_PROFILE", "ci"}})).access_key_id->value, "CREDKEY");
}

TEST_F(Credentials, RegionOrder) {
  Write(home_ / ".aws/config",
        "[default]\nregion = eu-west-1\n[profile ci]\nregion=eu-central-1\ns3 =\n  addressing_style = path\n"
        "[ci]\nregion = wrong-section\n");
  EXPECT_EQ(ResolveAwsConfig(Env()).region.value, "eu-west-1");
  EXPECT_EQ(ResolveAwsConfig(Env()).region.source, "~/.aws/config [default]");
  const AwsConfig ci = ResolveAwsConfig(Env({{"AWS_PROFILE", "ci"}}));
  EXPECT_EQ(ci.region.value, "eu-central-1");
  EXPECT_EQ(ci.region.source, "~/.aws/config [profile ci]");
  const AwsConfig by_default = ResolveAwsConfig(Env({{"AWS_DEFAULT_REGION", "us-west-2"}}));
  EXPECT_EQ(by_default.region.value, "us-west-2");
  EXPECT_EQ(by_default.region.source, "AWS_DEFAULT_REGION in the environment");
  const AwsConfig both = ResolveAwsConfig(Env({{"AWS_DEFAULT_REGION", "us-west-2"}, {"AWS_REGION", "sa-east-1"}}));
  EXPECT_EQ(both.region.value, "sa-east-1");
  EXPECT_EQ(both.region.source, "AWS_REGION in the environment");
}

TEST_F(Credentials, ProfileDefaultInTheConfigFileMayBeWrittenEitherWay) {
  Write(home_ / ".aws/config", "[profile default]\nregion = ca-central-1\n");
  EXPECT_EQ(ResolveAwsConfig(Env()).region.value, "ca-central-1");
  Write(home_ / ".aws/config", "[profile   ci  ]\nregion = eu-north-1\n");
  EXPECT_EQ(ResolveAwsConfig(Env({{"AWS_PROFILE", "ci"}})).region.value, "eu-north-1");
}

TEST_F(Credentials, EndpointOrder) {
  Write(home_ / ".aws/config", "[default]\nendpoint_url = http://from-config:9000/\n");
  const AwsConfig file = ResolveAwsConfig(Env());
  ASSERT_TRUE(file.endpoint_url);
  EXPECT_EQ(file.endpoint_url->value, "http://from-config:9000");  // trailing '/' dropped
  EXPECT_EQ(file.endpoint_url->source, "~/.aws/config [default]");
  const AwsConfig general = ResolveAwsConfig(Env({{"AWS_ENDPOINT_URL", "http://127.0.0.1:1234"}}));
  EXPECT_EQ(general.endpoint_url->value, "http://127.0.0.1:1234");
  EXPECT_EQ(general.endpoint_url->source, "AWS_ENDPOINT_URL in the environment");
  const AwsConfig s3 = ResolveAwsConfig(
      Env({{"AWS_ENDPOINT_URL", "http://127.0.0.1:1234"}, {"AWS_ENDPOINT_URL_S3", "https://s3.example"}}));
  EXPECT_EQ(s3.endpoint_url->value, "https://s3.example");
  EXPECT_EQ(s3.endpoint_url->source, "AWS_ENDPOINT_URL_S3 in the environment");
  EXPECT_FALSE(ResolveAwsConfig(Env({{"AWS_ENDPOINT_URL", "http://x:1"}, {"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true"}}))
                   .endpoint_url);
  EXPECT_THAT(RefusalOf(Env({{"AWS_ENDPOINT_URL", "127.0.0.1:9000"}})),
              HasSubstr("'127.0.0.1:9000' (AWS_ENDPOINT_URL in the environment) is not an http(s) URL"));
}

TEST_F(Credentials, AProfileNoFileHasIsRefused) {
  Write(home_ / ".aws/credentials", "[default]\naws_access_key_id = K\naws_secret_access_key = S\n");
  const std::string refusal = RefusalOf(Env({{"AWS_PROFILE", "nope"}}));
  EXPECT_THAT(refusal, HasSubstr("AWS_PROFILE=nope names a profile"));
  EXPECT_THAT(refusal, HasSubstr("~/.aws/credentials"));
  EXPECT_THAT(refusal, HasSubstr("[profile nope]"));
}

TEST(CredentialsEnvironment, ProcessEnvironmentCopiesEnviron) {
  setenv("FEEDTUNE_STORAGE_TEST_VARIABLE", "a=b", 1);
  const Environment env = ProcessEnvironment();
  ASSERT_TRUE(env.count("FEEDTUNE_STORAGE_TEST_VARIABLE"));
  EXPECT_EQ(env.at("FEEDTUNE_STORAGE_TEST_VARIABLE"), "a=b");
  unsetenv("FEEDTUNE_STORAGE_TEST_VARIABLE");
}

}  // namespace
}  // namespace feedtune::storage

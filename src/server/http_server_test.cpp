// The transport's request parsing and head checks (ParseHttpRequest: the same parser, limits
// and checks a connection applies), and the constant-time key comparison. The transport under
// real sockets is covered by server_test and tests/server/hostile.
#include "server/http_server.h"

#include <gtest/gtest.h>

namespace mx::server {
namespace http_server_test {

HttpLimits Small() {
  HttpLimits l;
  l.max_header_bytes = 1024;
  l.max_headers = 8;
  l.max_body_bytes = 64;
  return l;
}

TEST(HttpParse, AGoodRequestAndWhatFollowsIt) {
  const std::string one = "POST /tokenize?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nabcd";
  auto r = ParseHttpRequest(one + "GET /health HTTP/1.1\r\n\r\n", Small());
  ASSERT_EQ(r.status, 0) << r.message;
  EXPECT_EQ(r.request.method, "POST");
  EXPECT_EQ(r.request.path, "/tokenize");
  EXPECT_EQ(r.request.target, "/tokenize?x=1");
  EXPECT_EQ(r.request.body, "abcd");
  EXPECT_EQ(r.request.Header("content-length"), "4");
  EXPECT_EQ(r.consumed, one.size());
}

TEST(HttpParse, NoLengthMeansNoBody) {
  auto r = ParseHttpRequest("POST /flush_cache HTTP/1.1\r\nHost: h\r\n\r\n", Small());
  ASSERT_EQ(r.status, 0) << r.message;
  EXPECT_EQ(r.request.body, "");
}

TEST(HttpParse, ChunkedBodiesAreDecodedAndLimited) {
  auto r = ParseHttpRequest(
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
      Small());
  ASSERT_EQ(r.status, 0) << r.message;
  EXPECT_EQ(r.request.body, "abcde");
  std::string big = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 10; ++i) big += "10\r\n" + std::string(16, 'x') + "\r\n";
  EXPECT_EQ(ParseHttpRequest(big + "0\r\n\r\n", Small()).status, 413);
}

TEST(HttpParse, EachRefusalHasItsStatus) {
  const HttpLimits l = Small();
  EXPECT_EQ(ParseHttpRequest("POST / HTTP/1.1\r\nContent-Length: 65\r\n\r\n", l).status, 413);
  EXPECT_EQ(ParseHttpRequest("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", l).status, 400);
  EXPECT_EQ(
      ParseHttpRequest("POST / HTTP/1.1\r\nContent-Length: 18446744073709551616\r\n\r\n", l).status,
      400);
  EXPECT_EQ(
      ParseHttpRequest("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", l)
          .status,
      400);
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 9; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(ParseHttpRequest(many + "\r\n", l).status, 431);
  EXPECT_EQ(
      ParseHttpRequest("GET / HTTP/1.1\r\nX: " + std::string(2000, 'v') + "\r\n\r\n", l).status,
      431);
  auto gz = ParseHttpRequest(
      "POST / HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: 1"
      "\r\n\r\nx",
      l);
  EXPECT_EQ(gz.status, 415);
  EXPECT_NE(gz.message.find("gzip"), std::string::npos);
  EXPECT_EQ(ParseHttpRequest("POST / HTTP/1.1\r\nContent-Encoding: identity\r\nContent-Length: 1"
                             "\r\n\r\nx",
                             l)
                .status,
            0);
  EXPECT_EQ(ParseHttpRequest("GARBAGE\r\n\r\n", l).status, 400);
  EXPECT_EQ(ParseHttpRequest("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab", l).status, -1);
}

TEST(ConstantTimeEquals, ComparesWholeKeys) {
  EXPECT_TRUE(ConstantTimeEquals("Bearer k", "Bearer k"));
  EXPECT_FALSE(ConstantTimeEquals("Bearer x", "Bearer k"));
  EXPECT_FALSE(ConstantTimeEquals("Bearer", "Bearer k"));
  EXPECT_FALSE(ConstantTimeEquals("Bearer kk", "Bearer k"));
  EXPECT_FALSE(ConstantTimeEquals("", "k"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

}  // namespace http_server_test
}  // namespace mx::server

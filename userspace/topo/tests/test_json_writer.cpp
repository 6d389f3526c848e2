// The --json writer against nlohmann::json's dump(2), which it replaced: the
// same text for the same document (keys in byte order, as nlohmann sorts them),
// every control and non-ASCII character, and the doubles the model holds.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "json_writer.hpp"

namespace {

using gdrpeer::topo::detail::json_double;
using gdrpeer::topo::detail::JsonWriter;

std::string nlohmann_double(double v) { return nlohmann::json(v).dump(); }

TEST(JsonWriter, DoublesAsNlohmannWritesThem) {
  const double fixed[] = {0.0,
                          -0.0,
                          1.0,
                          2.5,
                          5.0,
                          8.0,
                          16.0,
                          32.0,
                          64.0,
                          31.507692,
                          0.1,
                          1e-4,
                          1.5e-5,
                          1e15,
                          1e16,
                          123456789012345.0,
                          1234567890123456.0,
                          1e21,
                          1e100,
                          5e-324,
                          -2.75,
                          0.000123,
                          std::numeric_limits<double>::max(),
                          std::numeric_limits<double>::min()};
  for (double v : fixed) EXPECT_EQ(json_double(v), nlohmann_double(v)) << v;
  EXPECT_EQ(json_double(std::nan("")), "null");
  EXPECT_EQ(json_double(std::numeric_limits<double>::infinity()), "null");
  // Decimals of up to 6 places, as link speeds are written in inputs (503.289434 is one
  // whose Grisu2 digits are not the shortest), and arbitrary doubles.
  EXPECT_EQ(json_double(503.289434), "503.28943400000003");
  std::mt19937_64 rng(16);
  std::uniform_real_distribution<double> values(0, 1000);
  std::uniform_int_distribution<int> places(0, 6);
  for (int i = 0; i < 20000; ++i) {
    const double scale = std::pow(10.0, places(rng));
    const double v = std::round(values(rng) * scale) / scale;
    ASSERT_EQ(json_double(v), nlohmann_double(v)) << v;
    const double any = std::ldexp(values(rng), places(rng) * 40 - 120);
    ASSERT_EQ(json_double(any), nlohmann_double(any)) << any;
  }
}

TEST(JsonWriter, StringsAsNlohmannWritesThem) {
  std::string all;
  for (int c = 1; c < 0x80; ++c) all.push_back(static_cast<char>(c));
  all += "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";  // two-, three- and four-byte UTF-8
  JsonWriter w;
  w.value(all);
  EXPECT_EQ(w.take(), nlohmann::json(all).dump());
}

TEST(JsonWriter, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  JsonWriter w;
  w.value(
      std::string("a\xff"
                  "b\xe9"
                  "c\xed\xa0\x80"
                  "d"));
  EXPECT_EQ(w.take(),
            "\"a\xef\xbf\xbd"
            "b\xef\xbf\xbd"
            "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
            "d\"");
}

TEST(JsonWriter, NestedLayoutAsDump2) {
  nlohmann::json j;
  j["a"] = {{"b", 1}, {"c", nlohmann::json::array()}, {"d", nlohmann::json::object()}};
  j["e"] = {1, "x", nullptr, true, 2.5, nlohmann::json::array({nlohmann::json::object({{"f", -3}})})};
  j["g"] = 18446744073709551615ull;
  JsonWriter w;
  w.begin_object();
  w.key("a").begin_object().key("b").value(1).key("c").begin_array().end_array().key("d").begin_object().end_object().end_object();
  w.key("e").begin_array().value(1).value("x").null().value(true).value(2.5);
  w.begin_array().begin_object().key("f").value(-3).end_object().end_array().end_array();
  w.key("g").value(18446744073709551615ull);
  w.end_object();
  EXPECT_EQ(w.take(), j.dump(2));
}

}  // namespace

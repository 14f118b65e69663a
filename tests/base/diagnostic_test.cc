#include "rtb/base/diagnostic.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rtb/base/json.h"

namespace rtb {
namespace {

TEST(Diagnostic, WhereIsFileLineOrFileOrEmpty) {
  EXPECT_EQ(where_of("a.log", 12), "a.log:12");
  EXPECT_EQ(where_of("a.log"), "a.log");
  EXPECT_EQ(where_of("a.log", 0), "a.log");
  EXPECT_EQ(where_of("", 12), "");
}

TEST(Diagnostic, TextFormIsWhereThenMessage) {
  EXPECT_EQ(text_of({Severity::kWarning, "a.log:3", "step 2 repeated"}),
            "a.log:3: step 2 repeated");
  EXPECT_EQ(text_of({Severity::kNote, "a.log", "no steps"}), "a.log: no steps");
  EXPECT_EQ(text_of({Severity::kNote, "", "left out"}), "left out");
}

TEST(Diagnostic, TextsAndMessagesKeepTheOrder) {
  std::vector<Diagnostic> all = {{Severity::kWarning, "a.log:3", "step 2 repeated"},
                                 {Severity::kNote, "", "left out"}};
  EXPECT_EQ(texts_of(all), (std::vector<std::string>{"a.log:3: step 2 repeated", "left out"}));
  EXPECT_EQ(messages_of(all), (std::vector<std::string>{"step 2 repeated", "left out"}));
  EXPECT_TRUE(texts_of({}).empty());
  EXPECT_EQ(texts_of(all, Severity::kWarning),
            (std::vector<std::string>{"a.log:3: step 2 repeated"}));
  EXPECT_EQ(messages_of(all, Severity::kNote), (std::vector<std::string>{"left out"}));
}

TEST(Diagnostic, SeverityNames) {
  EXPECT_EQ(severity_name(Severity::kNote), "note");
  EXPECT_EQ(severity_name(Severity::kWarning), "warning");
}

TEST(Diagnostic, JsonFormIsOneLinePerDiagnosticWithNullForNoPlace) {
  json::Writer j;
  j.begin_object();
  write_json(j, "diagnostics",
             std::vector<Diagnostic>{{Severity::kWarning, "d.hlo:7", "say \"hi\""},
                                     {Severity::kNote, "", "left out"}});
  j.end_object();
  EXPECT_EQ(
      j.str(),
      "{\n"
      "  \"diagnostics\": [\n"
      "    {\"severity\": \"warning\", \"where\": \"d.hlo:7\", \"message\": \"say \\\"hi\\\"\"},\n"
      "    {\"severity\": \"note\", \"where\": null, \"message\": \"left out\"}\n"
      "  ]\n"
      "}\n");
}

TEST(Diagnostic, JsonFormOfNoneIsAnEmptyArray) {
  json::Writer j;
  j.begin_object();
  write_json(j, "diagnostics", {});
  j.end_object();
  EXPECT_EQ(j.str(), "{\n  \"diagnostics\": []\n}\n");
}

}  // namespace
}  // namespace rtb

#include "api/event_text.h"

#include <gtest/gtest.h>

namespace tidepool {
namespace {

TEST(EventTextTest, AJobEventNamesTheJobItsReasonAndPlacement) {
  const auto data = nlohmann::json::parse(
      R"j({"job": 12, "name": "train", "tenant": "vision", "queue": "default",
          "reason": "placed on 2 node(s)",
          "placement": [{"node": "h100-a-01", "gpus": [0, 1]}, {"node": "h100-a-02", "gpus": [0]}]})j");
  EXPECT_EQ(event_text(data),
            "job 12 (train, vision/default): placed on 2 node(s) on h100-a-01:2,h100-a-02:1");
}

TEST(EventTextTest, OtherEventsNameTheirSubjectThenFieldsThenTheReason) {
  EXPECT_EQ(event_text({{"node", "h100-b-02"}, {"reason", "no heartbeat"}, {"gpus", 8}}),
            "node h100-b-02 gpus=8: no heartbeat");
  EXPECT_EQ(event_text({{"spent", 5}}), "spent=5");
}

// The data is read from the network by `tidepool events`: fields of another type are printed as
// they are, never thrown on.
TEST(EventTextTest, FieldsOfAnotherTypeDoNotThrow) {
  const auto data = nlohmann::json::parse(
      R"({"job": "x", "name": 5, "tenant": [1], "queue": null, "reason": {"a": 1},
          "placement": [{"node": 7, "gpus": "many"}, 3]})");
  std::string text;
  EXPECT_NO_THROW(text = event_text(data));
  EXPECT_EQ(text, R"(job x (5, [1]/null): {"a":1} on 7:0)");
  EXPECT_EQ(event_text(nlohmann::json("just text")), "\"just text\"");
}

}  // namespace
}  // namespace tidepool

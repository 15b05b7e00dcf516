// The backup file (backup_file.h): what is written reads back the same, and a file that is cut
// short, changed, of another version, out of order or hostile is refused, naming its line.
#include "store/backup_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "store/store_test_records.h"

namespace tidepool {
namespace {

using test_support::event;
using test_support::job;
using test_support::ledger_entry;
using test_support::token;
using ::testing::HasSubstr;

// Every kind of record, in the order a store's load() gives them.
BackupContents sample() {
  BackupContents c;
  c.snapshot.jobs = {job(3, "speech"), job(7, "vision", "retry-1", "running")};
  c.snapshot.jobs[1].document = "{\"spec\":{\"gpus\":8},\"note\":\"caf\xc3\xa9 \\n \\\"q\\\"\"}";
  c.snapshot.tokens = {token("tok-a", "cafe", true), token("tok-b", "beef")};
  c.snapshot.nodes = {{"node-1", "{}"}, {"node-2", "{\"gpus\":8}"}};
  c.snapshot.settings = {{"quota", ""}, {"tidal", "{\"on\":true}"}};
  c.snapshot.ledger = {ledger_entry(1), ledger_entry(2, "speech")};
  c.events = {event(1), event(2, "job.started"), event(3, "job.succeeded")};
  c.snapshot.last_event_seq = 3;
  return c;
}

const BackupHeader kHeader{.taken_ms = 1'764'547'200'123, .source = "sqlite"};

std::string written(const BackupContents& contents = sample()) {
  auto text = write_backup(kHeader, contents);
  EXPECT_TRUE(text.has_value()) << text.error().message();
  return text ? *text : "";
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

// The error of reading `text`, which must be refused.
Error refused(const std::string& text) {
  auto read = read_backup(text);
  EXPECT_FALSE(read.has_value()) << "accepted:\n" << text;
  return read ? Error{} : read.error();
}

TEST(BackupFile, ReadsBackWhatWasWritten) {
  const std::string text = written();
  auto read = read_backup(text);
  ASSERT_TRUE(read.has_value()) << read.error().message();
  EXPECT_EQ(read->header, kHeader);
  EXPECT_EQ(read->contents, sample());
  // Written again, the same bytes.
  auto again = write_backup(read->header, read->contents);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, text);
}

TEST(BackupFile, AnEmptyStoreIsAHeaderAndATrailer) {
  const std::string text = written(BackupContents{});
  EXPECT_EQ(lines_of(text).size(), 2U);
  auto read = read_backup(text);
  ASSERT_TRUE(read.has_value()) << read.error().message();
  EXPECT_EQ(read->contents, BackupContents{});
}

TEST(BackupFile, OneLinePerRecordInTheFileOrder) {
  const std::vector<std::string> lines = lines_of(written());
  ASSERT_EQ(lines.size(), 15U);  // header, 2 jobs, 2 tokens, 2 nodes, 2 settings, 2 ledger, 3
                                 // events, trailer
  EXPECT_THAT(lines[0], HasSubstr(R"("type":"header","format":"tidepool-backup","version":1)"));
  EXPECT_THAT(lines[0], HasSubstr(R"("source":"sqlite")"));
  EXPECT_THAT(lines[1], HasSubstr(R"({"type":"job","id":3,)"));
  EXPECT_THAT(lines[3], HasSubstr(R"({"type":"token","id":"tok-a",)"));
  EXPECT_THAT(lines[5], HasSubstr(R"({"type":"node","key":"node-1",)"));
  EXPECT_THAT(lines[7], HasSubstr(R"({"type":"setting","key":"quota",)"));
  EXPECT_THAT(lines[9], HasSubstr(R"({"type":"ledger","seq":1,)"));
  EXPECT_THAT(lines[11], HasSubstr(R"({"type":"event","seq":1,)"));
  EXPECT_THAT(lines[14], HasSubstr(R"({"type":"trailer","counts":{"jobs":2,)"));
}

TEST(BackupFile, TheDigestFollowsTheRecordsNotTheHeader) {
  auto a = backup_digest(sample());
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->size(), 64U);
  EXPECT_EQ(*a, *backup_digest(sample()));
  BackupContents changed = sample();
  changed.snapshot.tokens[0].revoked = false;
  EXPECT_NE(*a, *backup_digest(changed));
}

TEST(BackupFile, EveryCutIsRefused) {
  const std::string text = written();
  for (std::size_t size = 0; size < text.size(); ++size) {
    auto read = read_backup(std::string_view(text).substr(0, size));
    ASSERT_FALSE(read.has_value()) << "a file cut to " << size << " bytes was accepted";
    EXPECT_THAT(read.error().field, HasSubstr("line ")) << read.error().message();
  }
}

TEST(BackupFile, ACutAtALineEndSaysTruncated) {
  std::vector<std::string> lines = lines_of(written());
  lines.pop_back();  // the trailer
  const Error error = refused(joined(lines));
  EXPECT_EQ(error.field, "line 14");
  EXPECT_THAT(error.reason, HasSubstr("without its trailer"));
  EXPECT_THAT(error.reason, HasSubstr("truncated"));

  const std::string text = written();
  const Error cut = refused(text.substr(0, text.size() - 1));  // the last line end
  EXPECT_EQ(cut.field, "line 15");
  EXPECT_THAT(cut.reason, HasSubstr("truncated"));
}

TEST(BackupFile, AChangedByteIsRefused) {
  const std::string text = written();
  for (std::size_t at = 0; at < text.size(); ++at) {
    std::string changed = text;
    changed[at] = static_cast<char>(changed[at] ^ 0x01);
    auto read = read_backup(changed);
    ASSERT_FALSE(read.has_value()) << "a change of byte " << at << " was accepted";
  }
}

TEST(BackupFile, AChangeThatStaysValidIsCaughtByTheDigest) {
  std::vector<std::string> lines = lines_of(written());
  const std::size_t at = lines[2].find("running");
  ASSERT_NE(at, std::string::npos);
  lines[2].replace(at, 7, "pending");
  const Error error = refused(joined(lines));
  EXPECT_EQ(error.field, "line 15");  // the trailer
  EXPECT_THAT(error.reason, HasSubstr("SHA-256 of lines 1 to 14"));
  EXPECT_THAT(error.reason, HasSubstr("changed or damaged"));
}

TEST(BackupFile, ADamagedLineIsNamed) {
  std::vector<std::string> lines = lines_of(written());
  lines[6] = lines[6].substr(0, lines[6].size() / 2);
  const Error error = refused(joined(lines));
  EXPECT_EQ(error.field, "line 7");
  EXPECT_THAT(error.reason, HasSubstr("not a JSON object"));
}

TEST(BackupFile, AnotherVersionOrFormatIsRefused) {
  std::vector<std::string> lines = lines_of(written());
  std::string newer = lines[0];
  newer.replace(newer.find("\"version\":1"), 11, "\"version\":2");
  const Error error = refused(joined({newer, lines[1]}));
  EXPECT_EQ(error.field, "line 1");
  EXPECT_THAT(error.reason, HasSubstr("version 2"));
  EXPECT_THAT(error.reason, HasSubstr("newer tidepool"));

  for (const std::string& other :
       {std::string("hello\n"), std::string("{\"type\":\"header\"}\n"), std::string("[1,2]\n"),
        std::string("{\"jobs\":[]}\n"), std::string("\xff\xfe\n")}) {
    const Error not_backup = refused(other);
    EXPECT_EQ(not_backup.field, "line 1");
    EXPECT_THAT(not_backup.reason, HasSubstr("not a Tidepool backup"));
  }
  EXPECT_THAT(refused("").reason, HasSubstr("empty"));
}

// A stream whose first events were dropped (retention) starts past seq 1: written and read back
// as it is; its last seq must be the snapshot's.
TEST(BackupFile, AStreamWhoseStartWasDroppedIsWrittenAndReadBack) {
  BackupContents contents = sample();
  contents.events.erase(contents.events.begin());
  auto read = read_backup(written(contents));
  ASSERT_TRUE(read.has_value()) << read.error().message();
  EXPECT_EQ(read->contents.events, contents.events);
  EXPECT_TRUE(check_backup_contents(contents).has_value());
  contents.snapshot.last_event_seq = 4;
  ASSERT_FALSE(check_backup_contents(contents).has_value());
  EXPECT_THAT(check_backup_contents(contents).error().reason,
              HasSubstr("the snapshot's last event is seq 4, but the backup's is 3"));
}

TEST(BackupFile, DuplicateOrMissingSeqsAreNamed) {
  std::vector<std::string> lines = lines_of(written());
  std::vector<std::string> twice = lines;
  twice.insert(twice.begin() + 12, lines[12]);  // event seq 2 again
  Error error = refused(joined(twice));
  EXPECT_EQ(error.field, "line 14");
  EXPECT_THAT(error.reason, HasSubstr("event seq 2 after seq 2"));

  std::vector<std::string> gap = lines;
  gap.erase(gap.begin() + 12);  // event seq 2
  error = refused(joined(gap));
  EXPECT_EQ(error.field, "line 13");
  EXPECT_THAT(error.reason, HasSubstr("event seq 3 after seq 1"));
  EXPECT_THAT(error.reason, HasSubstr("a line missing?"));

  // A ledger's seqs may have gaps (folded runs), not repeats; a line missing is counted.
  std::vector<std::string> repeated = lines;
  repeated.insert(repeated.begin() + 10, lines[9]);  // ledger seq 1 twice
  error = refused(joined(repeated));
  EXPECT_EQ(error.field, "line 11");
  EXPECT_THAT(error.reason, HasSubstr("ledger entry seq 1 after seq 1"));
  std::vector<std::string> missing = lines;
  missing.erase(missing.begin() + 9);  // ledger seq 1
  EXPECT_THAT(refused(joined(missing)).reason, HasSubstr("ledger"));
}

TEST(BackupFile, DuplicateKeysAndOrderAreNamed) {
  std::vector<std::string> lines = lines_of(written());
  std::vector<std::string> jobs = lines;
  std::swap(jobs[1], jobs[2]);
  Error error = refused(joined(jobs));
  EXPECT_EQ(error.field, "line 3");
  EXPECT_THAT(error.reason, HasSubstr("job 3 after job 7"));

  std::vector<std::string> tokens = lines;
  tokens[4] = tokens[3];
  error = refused(joined(tokens));
  EXPECT_EQ(error.field, "line 5");
  EXPECT_THAT(error.reason, HasSubstr("token \"tok-a\" after token \"tok-a\""));

  std::vector<std::string> sections = lines;
  std::swap(sections[2], sections[3]);  // a token between the jobs
  error = refused(joined(sections));
  EXPECT_EQ(error.field, "line 4");
  EXPECT_THAT(error.reason, HasSubstr("a job record after the token records"));
}

TEST(BackupFile, CountsThatDisagreeAreRefused) {
  std::vector<std::string> lines = lines_of(written());
  std::string header = lines[0];
  header.replace(header.find("\"jobs\":2"), 8, "\"jobs\":3");
  lines[0] = header;
  const Error error = refused(joined(lines));
  EXPECT_EQ(error.field, "line 1");
  EXPECT_THAT(error.reason, HasSubstr("3 jobs, but the file holds 2"));
}

TEST(BackupFile, BadRecordsAreRefusedWithTheirField) {
  const std::vector<std::string> lines = lines_of(written());
  const auto with_line = [&](std::size_t index, const std::string& line) {
    std::vector<std::string> changed = lines;
    changed[index] = line;
    return refused(joined(changed));
  };
  struct Case {
    std::string line;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {R"({"type":"job","id":"3","tenant":"a","queue":"q","state":"s","idempotency_key":"",)"
       R"("document":"{}"})",
       R"(field "id" must be a whole number)"},
      {R"({"type":"job","id":18446744073709551615,"tenant":"a","queue":"q","state":"s",)"
       R"("idempotency_key":"","document":"{}"})",
       R"(field "id" must be a whole number)"},
      {R"({"type":"job","id":-3,"tenant":"a","queue":"q","state":"s","idempotency_key":"",)"
       R"("document":"{}"})",
       "job id -3 is not positive"},
      {R"({"type":"job","id":1.5,"tenant":"a","queue":"q","state":"s","idempotency_key":"",)"
       R"("document":"{}"})",
       R"(field "id" must be a whole number)"},
      {R"({"type":"job","id":3,"tenant":"a","queue":"q","state":"s","idempotency_key":"",)"
       R"("document":""})",
       "job 3 has no document"},
      {R"({"type":"job","id":3,"tenant":"a","queue":"q","state":"s","document":"{}"})",
       R"(field "idempotency_key" is missing)"},
      {R"({"type":"job","id":3,"tenant":"a","queue":"q","state":"s","idempotency_key":"",)"
       R"("document":"{}","extra":1})",
       R"(unknown field "extra")"},
      {R"({"type":"job","id":3,"tenant":["a"],"queue":"q","state":"s","idempotency_key":"",)"
       R"("document":"{}"})",
       R"(field "tenant" must be a string)"},
      {R"({"type":"jobs","id":3})", R"(unknown record type "jobs")"},
      {R"({"id":3})", "no \"type\""},
      {R"({"type":"header","format":"tidepool-backup"})", "a second header"},
      {std::string(100'000, '['), "not a JSON object"},
      {std::string("{\"type\":\"job\",\"tenant\":\"\xc3\x28\"}"), "not a JSON object"},
  };
  for (const Case& c : cases) {
    const Error error = with_line(1, c.line);
    EXPECT_EQ(error.field, "line 2") << c.line;
    EXPECT_THAT(error.reason, HasSubstr(c.reason)) << c.line;
  }
}

TEST(BackupFile, TextAfterTheTrailerIsRefused) {
  const std::string text = written();
  const Error error = refused(text + text);
  EXPECT_EQ(error.field, "line 16");
  EXPECT_THAT(error.reason, HasSubstr("after the trailer"));
}

TEST(BackupFile, TheWriterRefusesWhatTheReaderWould) {
  BackupContents gap = sample();
  gap.events.erase(gap.events.begin() + 1);
  auto text = write_backup(kHeader, gap);
  ASSERT_FALSE(text.has_value());
  EXPECT_EQ(text.error().field, "event seq 3");

  BackupContents short_of_last = sample();
  short_of_last.snapshot.last_event_seq = 4;
  text = write_backup(kHeader, short_of_last);
  ASSERT_FALSE(text.has_value());
  EXPECT_EQ(text.error().field, "last_event_seq");

  BackupContents not_utf8 = sample();
  not_utf8.snapshot.jobs[0].tenant = "bad\xff";
  text = write_backup(kHeader, not_utf8);
  ASSERT_FALSE(text.has_value());
  EXPECT_EQ(text.error().field, "job 3");
  EXPECT_THAT(text.error().reason, HasSubstr("field tenant is not valid UTF-8"));
}

TEST(BackupFile, CountsAreDescribed) {
  EXPECT_EQ(describe_counts(count_records(sample())),
            "2 jobs, 2 tokens, 2 nodes, 2 settings, 2 ledger entries, 3 events");
  EXPECT_EQ(describe_counts(BackupCounts{1, 1, 1, 1, 1, 1}),
            "1 job, 1 token, 1 node, 1 setting, 1 ledger entry, 1 event");
}

}  // namespace
}  // namespace tidepool

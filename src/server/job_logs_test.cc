#include "server/job_logs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "testing/temp_dir.h"

namespace tidepool {
namespace {

using ::testing::HasSubstr;

using test_support::TempDir;

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::unique_ptr<JobLogs> open_logs(const std::string& dir,
                                   std::int64_t limit = JobLogs::kDefaultTaskLimitBytes) {
  auto logs = JobLogs::open(dir, limit);
  EXPECT_TRUE(logs.has_value()) << (logs ? "" : logs.error().message());
  return logs ? std::move(*logs) : nullptr;
}

std::string read_all(const JobLogs& logs, std::int64_t job, int task) {
  auto chunk = logs.read(job, task, 1, 0, std::int64_t{1} << 30);
  EXPECT_TRUE(chunk.has_value());
  return chunk ? chunk->bytes : "";
}

TEST(JobLogsTest, CreatesItsFolderWithParents) {
  TempDir dir;
  auto logs = open_logs(dir.file("a/b/logs"));
  ASSERT_NE(logs, nullptr);
  EXPECT_TRUE(std::filesystem::is_directory(dir.file("a/b/logs")));
  EXPECT_EQ(logs->dir(), dir.file("a/b/logs"));
}

TEST(JobLogsTest, OpenFailsClearlyWhenTheFolderCannotBeCreated) {
  TempDir dir;
  std::ofstream(dir.file("file")) << "not a folder";
  auto under_file = JobLogs::open(dir.file("file/logs"));
  ASSERT_FALSE(under_file.has_value());
  EXPECT_EQ(under_file.error().field, "logs");
  EXPECT_THAT(under_file.error().reason, HasSubstr("cannot create the folder of the task logs"));
  EXPECT_THAT(under_file.error().reason, HasSubstr(dir.file("file/logs")));

  auto is_file = JobLogs::open(dir.file("file"));
  ASSERT_FALSE(is_file.has_value());
  EXPECT_THAT(is_file.error().reason, HasSubstr("cannot create the folder of the task logs"));

  EXPECT_FALSE(JobLogs::open("").has_value());
  EXPECT_FALSE(JobLogs::open(dir.file("x"), 0).has_value());
}

// Retention: a removed job's logs go, and the room they took under the total limit comes back.
TEST(JobLogsTest, RemovingAJobsLogsFreesTheirRoom) {
  TempDir dir;
  auto opened = JobLogs::open(dir.file("logs"), 100, 10);
  ASSERT_TRUE(opened.has_value()) << opened.error().message();
  JobLogs& logs = **opened;
  ASSERT_EQ(logs.append(5, 0, 1, 0, "12345"), 5);
  ASSERT_EQ(logs.append(5, 1, 1, 0, "678"), 3);
  ASSERT_EQ(logs.append(6, 0, 1, 0, "ab"), 2);
  EXPECT_FALSE(logs.append(7, 0, 1, 0, "xyz").has_value());  // 11 bytes: past the total of 10
  EXPECT_EQ(logs.remove(5), 8);
  EXPECT_FALSE(std::filesystem::exists(dir.file("logs/5")));
  EXPECT_EQ(read_all(logs, 5, 0), "");
  EXPECT_EQ(read_all(logs, 6, 0), "ab");
  EXPECT_EQ(logs.append(7, 0, 1, 0, "xyz"), 3);  // the room came back
  EXPECT_EQ(logs.remove(99), 0);                 // none: nothing to free
  EXPECT_FALSE(logs.remove(0).has_value());
}

TEST(JobLogsTest, AppendsInOrderToOneFilePerTask) {
  TempDir dir;
  auto logs = open_logs(dir.path());
  ASSERT_NE(logs, nullptr);
  EXPECT_EQ(logs->append(7, 0, 1, 0, "hello "), 6);
  EXPECT_EQ(logs->append(7, 0, 1, 6, "world\n"), 12);
  EXPECT_EQ(file_text(dir.file("7/task-0.run-1.log")), "hello world\n");
  EXPECT_EQ(read_all(*logs, 7, 0), "hello world\n");
}

TEST(JobLogsTest, AResendIsStoredOnce) {
  TempDir dir;
  auto logs = open_logs(dir.path());
  ASSERT_NE(logs, nullptr);
  ASSERT_EQ(logs->append(1, 0, 1, 0, "abc"), 3);
  EXPECT_EQ(logs->append(1, 0, 1, 0, "abc"), 3);  // the reply was lost: the same chunk again
  EXPECT_EQ(logs->append(1, 0, 1, 1, "bc"), 3);   // a suffix of what is stored
  EXPECT_EQ(logs->append(1, 0, 1, 3, ""), 3);
  EXPECT_EQ(read_all(*logs, 1, 0), "abc");
}

TEST(JobLogsTest, AnOverlappingChunkAppendsOnlyItsNewPart) {
  TempDir dir;
  auto logs = open_logs(dir.path());
  ASSERT_NE(logs, nullptr);
  ASSERT_EQ(logs->append(1, 0, 1, 0, "abcd"), 4);
  EXPECT_EQ(logs->append(1, 0, 1, 2, "cdef"), 6);
  EXPECT_EQ(logs->append(1, 0, 1, 0, "abcdefgh"), 8);
  EXPECT_EQ(read_all(*logs, 1, 0), "abcdefgh");
}

TEST(JobLogsTest, AGapIsRefusedWithTheSizeToSendFrom) {
  TempDir dir;
  auto logs = open_logs(dir.path());
  ASSERT_NE(logs, nullptr);
  auto first = logs->append(3, 2, 1, 5, "late");
  ASSERT_FALSE(first.has_value());
  EXPECT_EQ(first.error().field, "offset");
  EXPECT_EQ(first.error().reason, "the log of run 1 of task 2 has 0 bytes; send from there");
  EXPECT_FALSE(std::filesystem::exists(dir.file("3/task-2.run-1.log")));

  ASSERT_EQ(logs->append(3, 2, 1, 0, "12345"), 5);
  auto gap = logs->append(3, 2, 1, 6, "x");
  ASSERT_FALSE(gap.has_value());
  EXPECT_EQ(gap.error().field, "offset");
  EXPECT_EQ(gap.error().reason, "the log of run 1 of task 2 has 5 bytes; send from there");
  EXPECT_EQ(read_all(*logs, 3, 2), "12345");
}

TEST(JobLogsTest, RefusesAChunkThatWouldPassTheCap) {
  TempDir dir;
  auto logs = open_logs(dir.path(), 10);
  ASSERT_NE(logs, nullptr);
  ASSERT_EQ(logs->append(1, 0, 1, 0, "12345678"), 8);
  auto over = logs->append(1, 0, 1, 8, "abc");
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error().field, "bytes");
  EXPECT_THAT(over.error().reason, HasSubstr("past its limit of 10 bytes"));
  EXPECT_EQ(read_all(*logs, 1, 0), "12345678");   // nothing of the refused chunk
  EXPECT_EQ(logs->append(1, 0, 1, 8, "ab"), 10);  // up to the cap exactly
  EXPECT_EQ(logs->append(1, 0, 1, 9, "b"), 10);   // a resend at the cap is still fine
  EXPECT_FALSE(logs->append(1, 0, 1, 10, "c").has_value());
  // The cap is per run's log.
  EXPECT_EQ(logs->append(1, 1, 1, 0, "0123456789"), 10);

  auto gib = open_logs(dir.file("big"));
  ASSERT_NE(gib, nullptr);
  EXPECT_EQ(gib->task_limit_bytes(), std::int64_t{1} << 30);
  auto mib = open_logs(dir.file("mib"), 3 << 20);
  ASSERT_NE(mib, nullptr);
  ASSERT_EQ(mib->append(1, 0, 1, 0, std::string((3 << 20) - 1, 'x')), (3 << 20) - 1);
  auto full = mib->append(1, 0, 1, (3 << 20) - 1, "yz");
  ASSERT_FALSE(full.has_value());
  EXPECT_THAT(full.error().reason, HasSubstr("its limit of 3 MiB"));
}

TEST(JobLogsTest, AllLogsTogetherAreCappedCountingWhatTheFolderHeld) {
  TempDir dir;
  {
    auto logs = JobLogs::open(dir.path(), 100, 12);
    ASSERT_TRUE(logs.has_value()) << logs.error().message();
    ASSERT_EQ((*logs)->append(1, 0, 1, 0, "12345678"), 8);
    ASSERT_EQ((*logs)->append(2, 0, 1, 0, "abcd"), 4);
    auto over = (*logs)->append(3, 0, 1, 0, "x");
    ASSERT_FALSE(over.has_value());
    EXPECT_EQ(over.error().field, "bytes");
    EXPECT_THAT(over.error().reason, HasSubstr("their limit of 12 bytes"));
  }
  // Reopened over the same folder: the 12 bytes already there count.
  auto again = JobLogs::open(dir.path(), 100, 13);
  ASSERT_TRUE(again.has_value()) << again.error().message();
  EXPECT_EQ((*again)->append(3, 0, 1, 0, "x"), 1);
  EXPECT_FALSE((*again)->append(3, 0, 1, 1, "y").has_value());
}

TEST(JobLogsTest, FoldersAndFilesArePrivate) {
  TempDir dir;
  auto logs = open_logs(dir.file("logs"));
  ASSERT_NE(logs, nullptr);
  ASSERT_EQ(logs->append(7, 0, 1, 0, "secret"), 6);
  namespace fs = std::filesystem;
  const auto mode = [](const std::string& path) {
    return fs::status(path).permissions() & fs::perms::mask;
  };
  EXPECT_EQ(mode(dir.file("logs")), fs::perms::owner_all);
  EXPECT_EQ(mode(dir.file("logs/7")), fs::perms::owner_all);
  EXPECT_EQ(mode(dir.file("logs/7/task-0.run-1.log")),
            fs::perms::owner_read | fs::perms::owner_write);
}

TEST(JobLogsTest, ReadsRanges) {
  TempDir dir;
  auto logs = open_logs(dir.path());
  ASSERT_NE(logs, nullptr);
  ASSERT_EQ(logs->append(9, 0, 1, 0, "0123456789"), 10);
  auto middle = logs->read(9, 0, 1, 3, 4);
  ASSERT_TRUE(middle.has_value());
  EXPECT_EQ(middle->bytes, "3456");
  EXPECT_EQ(middle->size, 10);
  auto tail = logs->read(9, 0, 1, 8, 100);
  ASSERT_TRUE(tail.has_value());
  EXPECT_EQ(tail->bytes, "89");
  auto size_only = logs->read(9, 0, 1, 0, 0);
  ASSERT_TRUE(size_only.has_value());
  EXPECT_EQ(size_only->bytes, "");
  EXPECT_EQ(size_only->size, 10);
  for (const std::int64_t offset : {10, 11, 1000}) {
    auto past = logs->read(9, 0, 1, offset, 5);
    ASSERT_TRUE(past.has_value());
    EXPECT_EQ(past->bytes, "");
    EXPECT_EQ(past->size, 10);
  }
  EXPECT_EQ(logs->read(9, 0, 1, -1, 5).error().field, "offset");
  EXPECT_EQ(logs->read(9, 0, 1, 0, -1).error().field, "limit");
  EXPECT_EQ(logs->read(9, -1, 1, 0, 1).error().field, "task");
  EXPECT_EQ(logs->read(0, 0, 1, 0, 1).error().field, "job");
}

TEST(JobLogsTest, KeepsBinaryBytesAsTheyAre) {
  TempDir dir;
  auto logs = open_logs(dir.path());
  ASSERT_NE(logs, nullptr);
  const std::string bytes("a\0b\xff\r\n\x1b[31m", 10);
  ASSERT_EQ(logs->append(2, 0, 1, 0, bytes), 10);
  EXPECT_EQ(read_all(*logs, 2, 0), bytes);
}

TEST(JobLogsTest, TasksAndJobsHaveTheirOwnLogs) {
  TempDir dir;
  auto logs = open_logs(dir.path());
  ASSERT_NE(logs, nullptr);
  ASSERT_EQ(logs->append(4, 0, 1, 0, "task zero\n"), 10);
  ASSERT_EQ(logs->append(4, 1, 1, 0, "task one\n"), 9);
  ASSERT_EQ(logs->append(5, 0, 1, 0, "other job\n"), 10);
  EXPECT_EQ(read_all(*logs, 4, 0), "task zero\n");
  EXPECT_EQ(read_all(*logs, 4, 1), "task one\n");
  EXPECT_EQ(read_all(*logs, 5, 0), "other job\n");
  EXPECT_EQ(file_text(dir.file("4/task-1.run-1.log")), "task one\n");
}

TEST(JobLogsTest, EachRunHasItsOwnLogAndLateBytesOfARunDoNotMixWithTheNext) {
  TempDir dir;
  auto logs = open_logs(dir.path());
  ASSERT_NE(logs, nullptr);
  ASSERT_EQ(logs->append(6, 0, 1, 0, "run 1 step 1\n"), 13);
  // Run 2 starts elsewhere and sends its first chunk at its own offset 0...
  ASSERT_EQ(logs->append(6, 0, 2, 0, "resuming from step 1\n"), 21);
  // ...while run 1's node ships its last bytes late.
  ASSERT_EQ(logs->append(6, 0, 1, 13, "run 1 stopped\n"), 27);
  ASSERT_EQ(logs->append(6, 0, 2, 21, "step 2\n"), 28);
  EXPECT_EQ(file_text(dir.file("6/task-0.run-1.log")), "run 1 step 1\nrun 1 stopped\n");
  EXPECT_EQ(file_text(dir.file("6/task-0.run-2.log")), "resuming from step 1\nstep 2\n");
  // A server of the earlier layout left task-0.log: it reads as run 0, first.
  std::ofstream(dir.file("6/task-0.log")) << "old\n";
  std::ofstream(dir.file("6/task-0.run-x.log")) << "not a run";
  std::ofstream(dir.file("6/task-1.run-1.log")) << "another task";
  auto runs = logs->runs(6, 0);
  ASSERT_TRUE(runs.has_value());
  ASSERT_EQ(runs->size(), 3U);
  EXPECT_EQ((*runs)[0].run, 0);
  EXPECT_EQ((*runs)[0].size, 4);
  EXPECT_EQ((*runs)[1].run, 1);
  EXPECT_EQ((*runs)[1].size, 27);
  EXPECT_EQ((*runs)[2].run, 2);
  EXPECT_EQ((*runs)[2].size, 28);
  // One after another, read whole or in pieces across the runs' ends.
  const std::string whole = "old\nrun 1 step 1\nrun 1 stopped\nresuming from step 1\nstep 2\n";
  auto all = logs->read_runs(6, 0, 0, 1000);
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(all->bytes, whole);
  EXPECT_EQ(all->size, 59);
  std::string pieces;
  for (std::int64_t at = 0; at < 59; at += 5) {
    auto piece = logs->read_runs(6, 0, at, 5);
    ASSERT_TRUE(piece.has_value());
    EXPECT_EQ(piece->size, 59);
    pieces += piece->bytes;
  }
  EXPECT_EQ(pieces, whole);
  auto past = logs->read_runs(6, 0, 59, 5);
  ASSERT_TRUE(past.has_value());
  EXPECT_EQ(past->bytes, "");
  EXPECT_EQ(logs->runs(99, 0)->size(), 0U);  // no logs yet
  EXPECT_EQ(logs->append(6, 0, -1, 0, "x").error().field, "run");
}

TEST(JobLogsTest, ATaskWithoutALogReadsAsEmpty) {
  TempDir dir;
  auto logs = open_logs(dir.path());
  ASSERT_NE(logs, nullptr);
  ASSERT_EQ(logs->append(4, 0, 1, 0, "x"), 1);
  for (const auto& [job, task] : {std::pair{4L, 3}, std::pair{99L, 0}}) {
    auto chunk = logs->read(job, task, 1, 0, 100);
    ASSERT_TRUE(chunk.has_value());
    EXPECT_EQ(chunk->bytes, "");
    EXPECT_EQ(chunk->size, 0);
  }
  // Reading creates nothing.
  EXPECT_FALSE(std::filesystem::exists(dir.file("99")));
}

TEST(JobLogsTest, RefusesBadIds) {
  TempDir dir;
  auto logs = open_logs(dir.path());
  ASSERT_NE(logs, nullptr);
  EXPECT_EQ(logs->append(0, 0, 1, 0, "x").error().field, "job");
  EXPECT_EQ(logs->append(-3, 0, 1, 0, "x").error().field, "job");
  EXPECT_EQ(logs->append(1, -1, 1, 0, "x").error().field, "task");
  EXPECT_EQ(logs->append(1, 0, 1, -1, "x").error().field, "offset");
}

TEST(JobLogsTest, ReportsAnUnwritableLog) {
  TempDir dir;
  auto logs = open_logs(dir.path());
  ASSERT_NE(logs, nullptr);
  std::ofstream(dir.file("1")) << "a file where job 1's folder should be";
  auto refused = logs->append(1, 0, 1, 0, "x");
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().field, dir.file("1/task-0.run-1.log"));
  EXPECT_THAT(refused.error().reason, HasSubstr("Not a directory"));
  // Another job is not affected.
  EXPECT_EQ(logs->append(2, 0, 1, 0, "x"), 1);
}

// Writers of several tasks at once, each resending every chunk once (as after lost replies):
// every log holds its writer's bytes exactly once, in order.
TEST(JobLogsTest, ConcurrentAppendsFromThreads) {
  TempDir dir;
  auto logs = open_logs(dir.path());
  ASSERT_NE(logs, nullptr);
  constexpr int kThreads = 8;
  constexpr int kChunks = 200;
  auto line = [](int task, int i) {
    return "task " + std::to_string(task) + " line " + std::to_string(i) + "\n";
  };
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    // Two threads per task race on the same log with the same chunks.
    threads.emplace_back([&, t] {
      const int task = t / 2;
      std::int64_t offset = 0;
      for (int i = 0; i < kChunks; ++i) {
        const std::string chunk = line(task, i);
        auto size = logs->append(11, task, 1, offset, chunk);
        if (!size) {
          ++failures[t];
          break;
        }
        offset += static_cast<std::int64_t>(chunk.size());
        if (*size < offset) ++failures[t];
        (void)logs->append(11, task, 1, offset - static_cast<std::int64_t>(chunk.size()), chunk);
      }
    });
  }
  // A reader meanwhile sees a prefix of task 0's log every time.
  std::string task0;
  for (int i = 0; i < kChunks; ++i) task0 += line(0, i);
  int bad_reads = 0;
  std::thread reader([&] {
    for (int i = 0; i < 500; ++i) {
      auto chunk = logs->read(11, 0, 1, 0, std::int64_t{1} << 20);
      if (!chunk || !task0.starts_with(chunk->bytes) ||
          chunk->size < static_cast<std::int64_t>(chunk->bytes.size())) {
        ++bad_reads;
      }
    }
  });
  for (std::thread& t : threads) t.join();
  reader.join();
  EXPECT_EQ(bad_reads, 0);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  for (int task = 0; task < kThreads / 2; ++task) {
    std::string expected;
    for (int i = 0; i < kChunks; ++i) expected += line(task, i);
    EXPECT_EQ(read_all(*logs, 11, task), expected) << "task " << task;
  }
}

}  // namespace
}  // namespace tidepool

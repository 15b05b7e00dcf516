// The tasks' output (stdout and stderr) that the node agents ship to the server, kept so that
// `tidepool logs` shows it from anywhere, also after the node died. One file per run of a task,
// <dir>/<job>/task-<n>.run-<r>.log, created on the first bytes; a log only grows. Each run has
// its own log, so a run's late bytes (its node ships them after the next run began elsewhere)
// never mix with the next run's. Run 0 is the layout of servers before runs were kept apart
// (<dir>/<job>/task-<n>.log), read as the task's first log.
//
// Appends are idempotent by offset: an agent sends each chunk with the byte offset in the run's
// log where it starts, and resends from the last size it got back when a request failed, so a
// chunk that arrives twice (its reply was lost) is stored once and nothing is stored out of order.
//
// Private: folders 0700, files 0600 (a task's output may hold its secrets). Each append is
// fdatasync'ed before it is acknowledged, like a submission. All the logs together are capped
// (total_limit_bytes): past it, appends are refused as a log past its own limit is.
//
// Thread-safe: appends are serialised by a mutex; reads take no lock (a log's stored bytes never
// change, so a read sees a prefix of what is being appended).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace tidepool {

// Bytes of a task's log and how long the log is now (bytes may end before it: a read limit).
struct LogChunk {
  std::string bytes;
  std::int64_t size = 0;
};

// One run's log of a task, and its size now.
struct RunLog {
  std::int64_t run = 0;
  std::int64_t size = 0;
};

class JobLogs {
 public:
  static constexpr std::int64_t kDefaultTaskLimitBytes = std::int64_t{1} << 30;    // 1 GiB
  static constexpr std::int64_t kDefaultTotalLimitBytes = std::int64_t{64} << 30;  // 64 GiB

  // The logs under `dir`, which is created (with its parents) if missing; an Error names the
  // folder when it cannot be created or is not a folder. A task's log is capped at
  // `task_limit_bytes` (> 0), all of them together at `total_limit_bytes` (> 0; what the folder
  // holds already counts).
  static Result<std::unique_ptr<JobLogs>> open(
      const std::string& dir, std::int64_t task_limit_bytes = kDefaultTaskLimitBytes,
      std::int64_t total_limit_bytes = kDefaultTotalLimitBytes);

  // Stores `bytes`, which start at byte `offset` of the log of run `run` (>= 0) of task `task`
  // (>= 0) of job `job` (> 0), and returns the log's new size:
  //   offset == size: appended;
  //   offset <  size: a resend; the part already stored is skipped, the rest appended;
  //   offset >  size: nothing stored; Error with field "offset" whose reason names the size to
  //                   send from.
  // A log that would grow past the limit (of one run's log), or the logs past their total limit,
  // keep nothing of the chunk: Error with field "bytes" naming the limit. Other fields: a bad
  // job, task or run ("job", "task", "run"), or an I/O failure (the file's path).
  Result<std::int64_t> append(std::int64_t job, int task, std::int64_t run, std::int64_t offset,
                              std::string_view bytes);

  // Up to `limit` (>= 0) bytes from `offset` (>= 0) of one run's log, and its size. A run
  // without a log yet, and an offset at or past the end, read as no bytes.
  Result<LogChunk> read(std::int64_t job, int task, std::int64_t run, std::int64_t offset,
                        std::int64_t limit) const;

  // The runs of the task that have a log, in run order.
  Result<std::vector<RunLog>> runs(std::int64_t job, int task) const;

  // The same from the task's logs one after another in run order (the size: all of them).
  Result<LogChunk> read_runs(std::int64_t job, int task, std::int64_t offset,
                             std::int64_t limit) const;

  // Deletes every log of job `job` (> 0; retention: the job was removed) and returns the bytes
  // freed (0: it had none). An Error names the folder it could not delete.
  Result<std::int64_t> remove(std::int64_t job);

  // The folder and the cap, as given to open().
  [[nodiscard]] const std::string& dir() const { return dir_; }
  [[nodiscard]] std::int64_t task_limit_bytes() const { return task_limit_bytes_; }

 private:
  JobLogs(std::string dir, std::int64_t task_limit_bytes, std::int64_t total_limit_bytes,
          std::int64_t total_bytes)
      : dir_(std::move(dir)),
        task_limit_bytes_(task_limit_bytes),
        total_limit_bytes_(total_limit_bytes),
        total_bytes_(total_bytes) {}
  [[nodiscard]] std::string job_dir(std::int64_t job) const;
  [[nodiscard]] std::string run_file(std::int64_t job, int task, std::int64_t run) const;

  std::string dir_;
  std::int64_t task_limit_bytes_;
  std::int64_t total_limit_bytes_;
  std::int64_t total_bytes_;  // guarded by append_mutex_
  std::mutex append_mutex_;   // guards total_bytes_ and serialises appends (HTTP threads)
};

}  // namespace tidepool

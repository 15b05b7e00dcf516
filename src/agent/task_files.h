// The files and folders the agent keeps for its tasks, made so that one job cannot reach
// another's, and read so that a job cannot make the agent (root) read or write what it may not:
//   <state-dir>/              0711 root: others may pass through to their run folder, not list it
//   <state-dir>/tasks.json    0600 root
//   <state-dir>/runs/         0711 root
//   <state-dir>/runs/<job>/run-<r>/         0711 root (the job cannot rename or replace them)
//   <state-dir>/runs/<job>/run-<r>/task-<i> 0700, the job's uid: HOME, the checkpoint report, the
//                                           preemption notice
//   <state-dir>/logs/         0700 root; logs/<job>/ 0700 root; the logs 0600 root: a task writes
//                             its log only through its stdout and stderr, which the agent opened,
//                             so it cannot swap the file for a link to something the agent would
//                             then ship
//   <checkpoint-root>/        0711; <checkpoint-root>/<job>/ 0700, the job's uid
//
// Reads and writes in a folder that a job owns never follow a symbolic link in the last
// component, and the folders above it are the agent's: so a job's link to another job's file (or
// to the agent's token) is refused rather than followed.
//
// Thread-compatible; every call does file system I/O.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"

namespace tidepool {

// Makes `path` (and any missing parent, with mode 0755) and sets its mode to `mode` and, with
// `uid` >= 0, its owner to uid:uid. Errors name the path and the system's reason.
Result<void> make_owned_dir(const std::string& path, mode_t mode, int uid = -1);

// Gives `path` and everything under it to uid:uid when `path` is not owned by `uid` already: a
// job's checkpoint folder, left by an earlier run under another uid. Never through a link: links
// are given over themselves, and the walk opens each folder with O_NOFOLLOW from its parent's
// descriptor, so a job that swaps a folder for a link meanwhile cannot send it elsewhere.
// Errors: the first path it could not change.
Result<void> give_tree_to(const std::string& path, int uid);

// Writes `text` as the whole of `folder`/`name`: removes what is there first (a link the job put
// there is removed, not followed), then creates the file afresh (O_EXCL, O_NOFOLLOW) with mode
// 0600 and owner uid:uid when `uid` >= 0.
Result<void> write_fresh_file(const std::string& folder, const std::string& name,
                              const std::string& text, int uid);

// The bytes of the regular file `path` from `offset`, at most `limit`, and its size in `*size`;
// empty (and *size 0) when it is missing, a link (O_NOFOLLOW), or not a regular file (a FIFO would
// block the agent).
std::string read_regular_file(const std::string& path, std::int64_t offset, std::int64_t limit,
                              std::int64_t* size);

// `reported` resolved (realpath: no "..", no link) when it lies in `folder` (or is `folder`); a
// relative path is taken from `folder`. A path that does not exist yet is resolved by its parent.
// Errors ("path"): outside the folder once resolved, or its folder does not exist.
Result<std::string> resolve_within(const std::string& reported, const std::string& folder);

// fsync of the file at `path` (the agent holds no descriptor of a task's log: the task does).
Result<void> sync_file(const std::string& path);

// Keeps the files under `logs_dir` (one folder deep: <logs>/<job>/<file>) within `quota_bytes`:
// removes the oldest (by modification time, then by path) that are not in `live` until the rest
// fit. Returns the paths it removed.
std::vector<std::string> enforce_log_quota(const std::string& logs_dir,
                                           const std::set<std::string>& live,
                                           std::int64_t quota_bytes);

// Sends SIGKILL to every process whose real, effective or saved uid is `uid` (read from
// /proc/<pid>/status). Returns how many were still there: 0 once none is left.
int kill_processes_of_uid(int uid);

}  // namespace tidepool

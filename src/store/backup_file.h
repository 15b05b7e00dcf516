// A backup of the server's durable state as one file: what Store::load() returns and the whole
// event stream, readable by any store (a backup of a SQLite store restores into etcd and back).
//
// The file is JSON Lines, UTF-8, one JSON object per line, each ending with '\n':
//
//   {"type":"header","format":"tidepool-backup","version":1,"taken_ms":...,"source":"sqlite",
//    "last_event_seq":N,"counts":{"jobs":..,"tokens":..,"nodes":..,"settings":..,"ledger":..,
//    "events":..}}
//   {"type":"job","id":1,"tenant":..,"queue":..,"state":..,"idempotency_key":..,"document":..}
//   {"type":"token","id":..,"hash":..,"role":..,"tenant":..,"node":..,"description":..,
//    "created_ms":..,"revoked":false}
//   {"type":"node","key":..,"document":..}          {"type":"setting","key":..,"document":..}
//   {"type":"ledger","seq":1,"at":..,"tenant":..,"document":..}
//   {"type":"event","seq":1,"at_ms":..,"kind":..,"document":..}
//   {"type":"trailer","counts":{...},"sha256":"<hex SHA-256 of every byte before this line>"}
//
// The records come in that order: jobs by id, tokens by id, nodes and settings by key (byte
// order, as Snapshot has them), ledger entries and events by seq, each 1, 2, 3, ... without a gap;
// the events are those up to last_event_seq, every one. Documents are kept as JSON strings, byte
// for byte as the store holds them (not parsed), so that a restore writes back exactly what was
// read. Field order within a line does not matter to the reader.
//
// The trailer makes a damaged file visible: a file cut short has no trailer (or an incomplete
// last line), and a changed byte changes the SHA-256. The reader checks every line before the
// digest, so a line that no longer parses, or that breaks the order, is named by its number; a
// change that leaves every line valid is caught by the digest. The digest is a check against
// accidents, not a signature: whoever can write the file can write a matching trailer. A backup
// holds the tokens' hashes (never their secrets) and every job's spec: keep it private (the
// commands write it with mode 0600).
//
// Pure: text in, text out; no I/O (store_backup.h reads and writes stores, the commands files).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "store/store.h"

namespace tidepool {

inline constexpr std::string_view kBackupFormat = "tidepool-backup";
// The version this build writes and the only one it reads; a change of the format is a new one.
inline constexpr int kBackupVersion = 1;

// What a backup holds: a snapshot and the events up to its last_event_seq, in seq order.
struct BackupContents {
  Snapshot snapshot;
  std::vector<EventRecord> events;

  friend bool operator==(const BackupContents&, const BackupContents&) = default;
};

struct BackupCounts {
  std::int64_t jobs = 0;
  std::int64_t tokens = 0;
  std::int64_t nodes = 0;
  std::int64_t settings = 0;
  std::int64_t ledger = 0;
  std::int64_t events = 0;

  friend bool operator==(const BackupCounts&, const BackupCounts&) = default;
};

[[nodiscard]] BackupCounts count_records(const BackupContents& contents);
// "3 jobs, 1 token, 12 nodes, 2 settings, 0 ledger entries, 40 events".
[[nodiscard]] std::string describe_counts(const BackupCounts& counts);

struct BackupHeader {
  std::int64_t taken_ms = 0;  // when the snapshot was taken, Unix time in milliseconds
  std::string source;         // the kind of store it came from: "sqlite", "etcd", "memory"

  friend bool operator==(const BackupHeader&, const BackupHeader&) = default;
};

struct Backup {
  BackupHeader header;
  BackupContents contents;
};

// Checks what a backup must hold: jobs with ids > 0 and a document, in ascending id order; tokens,
// nodes and settings in ascending key order (each key once); ledger entries in increasing seq
// order (with the gaps of closed books); events numbered one after another from the first kept
// (1 unless older ones were dropped: retention), the last one being last_event_seq. The error's
// field names the record ("job 7", "event seq 12") and its reason the rule.
[[nodiscard]] Result<void> check_backup_contents(const BackupContents& contents);

// The file's text. Refuses contents that check_backup_contents() refuses, and a string that is not
// valid UTF-8 (JSON cannot carry it), naming the record and the field.
[[nodiscard]] Result<std::string> write_backup(const BackupHeader& header,
                                               const BackupContents& contents);

// Reads and checks a whole file. Errors have the field "line N" (the line at fault; a missing
// trailer is blamed on the last line) and a reason that says what is wrong: not a backup, a
// version this build does not read, a line that is not a valid record, records out of order or
// numbered with a gap or twice, counts that disagree with the records, a file cut short, a
// SHA-256 that does not match. Never throws, whatever the bytes.
[[nodiscard]] Result<Backup> read_backup(std::string_view text);

// The hex SHA-256 of the contents' record lines as write_backup() writes them (header and trailer
// left out): two backups, or a backup and a store read back, with the same digest hold the same
// state. Errors as write_backup's.
[[nodiscard]] Result<std::string> backup_digest(const BackupContents& contents);

}  // namespace tidepool

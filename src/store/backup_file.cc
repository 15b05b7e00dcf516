#include "store/backup_file.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <array>
#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

namespace tidepool {
namespace {

using Json = nlohmann::json;
// Written lines keep their fields in the order given ("type" first), for people reading them.
using OrderedJson = nlohmann::ordered_json;

class Sha256 {
 public:
  Sha256() : context_(EVP_MD_CTX_new()) {
    if (!context_ || EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr) != 1) {
      throw std::bad_alloc();
    }
  }
  void add(std::string_view bytes) { EVP_DigestUpdate(context_.get(), bytes.data(), bytes.size()); }
  std::string hex() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int size = 0;
    EVP_DigestFinal_ex(context_.get(), digest.data(), &size);
    std::string out;
    out.reserve(2 * size);
    for (unsigned int i = 0; i < size; ++i) out += fmt::format("{:02x}", digest[i]);
    return out;
  }

 private:
  struct Free {
    void operator()(EVP_MD_CTX* context) const { EVP_MD_CTX_free(context); }
  };
  std::unique_ptr<EVP_MD_CTX, Free> context_;
};

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF), as JSON needs.
bool valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      ++i;
      continue;
    }
    std::size_t length = 0;
    unsigned char low = 0x80;
    unsigned char high = 0xbf;  // the allowed range of the second byte
    if (byte >= 0xc2 && byte <= 0xdf) {
      length = 2;
    } else if (byte >= 0xe0 && byte <= 0xef) {
      length = 3;
      if (byte == 0xe0) low = 0xa0;   // overlong
      if (byte == 0xed) high = 0x9f;  // surrogates
    } else if (byte >= 0xf0 && byte <= 0xf4) {
      length = 4;
      if (byte == 0xf0) low = 0x90;   // overlong
      if (byte == 0xf4) high = 0x8f;  // past U+10FFFF
    } else {
      return false;
    }
    if (text.size() - i < length) return false;
    const auto second = static_cast<unsigned char>(text[i + 1]);
    if (second < low || second > high) return false;
    for (std::size_t k = 2; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if (next < 0x80 || next > 0xbf) return false;
    }
    i += length;
  }
  return true;
}

// The kinds of record, in the order the file holds them.
enum class Section : std::uint8_t { kJob, kToken, kNode, kSetting, kLedger, kEvent };
constexpr std::array<std::string_view, 6> kSectionNames = {"job",     "token",  "node",
                                                           "setting", "ledger", "event"};

std::string_view section_name(Section section) {
  return kSectionNames[static_cast<std::size_t>(section)];
}

std::optional<Section> section_of(std::string_view type) {
  for (std::size_t i = 0; i < kSectionNames.size(); ++i) {
    if (kSectionNames[i] == type) return static_cast<Section>(i);
  }
  return std::nullopt;
}

// The order rules, one record after the other. Each answers the reason of a break, or nothing;
// its caller names the record (the writer) or the line (the reader).
class RecordOrder {
 public:
  std::optional<std::string> job(const JobRecord& job) {
    if (job.id <= 0) return fmt::format("job id {} is not positive", job.id);
    if (job.document.empty()) return fmt::format("job {} has no document", job.id);
    if (last_job_ && job.id <= *last_job_) {
      return fmt::format("job {} after job {}: jobs come once each, in ascending id order", job.id,
                         *last_job_);
    }
    last_job_ = job.id;
    return std::nullopt;
  }
  std::optional<std::string> token(const TokenRecord& token) {
    return next_key(last_token_, token.id, "token");
  }
  std::optional<std::string> node(const KeyedRecord& node) {
    return next_key(last_node_, node.key, "node");
  }
  std::optional<std::string> setting(const KeyedRecord& setting) {
    return next_key(last_setting_, setting.key, "setting");
  }
  // A ledger's seqs increase with the gaps of its folded runs (closing the books).
  std::optional<std::string> ledger(const LedgerRecord& entry) {
    if (entry.seq <= ledger_seq_) {
      return fmt::format("ledger entry seq {} after seq {}: seqs come once each, increasing",
                         entry.seq, ledger_seq_);
    }
    ledger_seq_ = entry.seq;
    return std::nullopt;
  }
  // The first event may be past seq 1: those before were dropped (retention).
  std::optional<std::string> event(const EventRecord& event) {
    if (event_seq_ == 0 && event.seq > 1) event_seq_ = event.seq - 1;
    return next_seq(event_seq_, event.seq, "event");
  }

 private:
  static std::optional<std::string> next_key(std::optional<std::string>& last,
                                             const std::string& key, std::string_view what) {
    // std::string compares as memcmp does: byte order, as Snapshot sorts.
    if (last && key <= *last) {
      return fmt::format("{} {:?} after {} {:?}: {}s come once each, in byte order of their keys",
                         what, key, what, *last, what);
    }
    last = key;
    return std::nullopt;
  }
  static std::optional<std::string> next_seq(std::int64_t& last, std::int64_t seq,
                                             std::string_view what) {
    if (seq != last + 1) {
      return fmt::format(
          "{} seq {} after seq {}: seqs run one after another, without a gap or a repeat{}", what,
          seq, last, seq > last + 1 ? " (a line missing?)" : "");
    }
    last = seq;
    return std::nullopt;
  }

  std::optional<std::int64_t> last_job_;
  std::optional<std::string> last_token_;
  std::optional<std::string> last_node_;
  std::optional<std::string> last_setting_;
  std::int64_t ledger_seq_ = 0;
  std::int64_t event_seq_ = 0;
};

OrderedJson counts_json(const BackupCounts& counts) {
  return {{"jobs", counts.jobs},         {"tokens", counts.tokens}, {"nodes", counts.nodes},
          {"settings", counts.settings}, {"ledger", counts.ledger}, {"events", counts.events}};
}

std::string dump(const OrderedJson& line) {
  // Every string was checked to be UTF-8 before: strict cannot throw.
  return line.dump(-1, ' ', false, Json::error_handler_t::strict) + "\n";
}

// Checks the UTF-8 of a record's strings; the error names the record and the field.
Result<void> check_strings(
    std::string_view record,
    std::initializer_list<std::pair<std::string_view, const std::string*>> fields) {
  for (const auto& [name, value] : fields) {
    if (!valid_utf8(*value)) {
      return fail(
          std::string(record),
          fmt::format("field {} is not valid UTF-8, which a backup (JSON) cannot hold", name));
    }
  }
  return {};
}

// Calls `put` with each record line of `contents` (its text, '\n' included), in the file's
// order; refuses a string that is not UTF-8.
Result<void> for_each_record_line(const BackupContents& contents,
                                  const std::function<void(const std::string&)>& put) {
  const Snapshot& s = contents.snapshot;
  for (const JobRecord& j : s.jobs) {
    if (auto ok =
            check_strings(fmt::format("job {}", j.id), {{"tenant", &j.tenant},
                                                        {"queue", &j.queue},
                                                        {"state", &j.state},
                                                        {"idempotency_key", &j.idempotency_key},
                                                        {"document", &j.document}});
        !ok) {
      return ok;
    }
    put(dump({{"type", "job"},
              {"id", j.id},
              {"tenant", j.tenant},
              {"queue", j.queue},
              {"state", j.state},
              {"idempotency_key", j.idempotency_key},
              {"document", j.document}}));
  }
  for (const TokenRecord& t : s.tokens) {
    if (auto ok = check_strings(fmt::format("token {:?}", t.id), {{"id", &t.id},
                                                                  {"hash", &t.hash},
                                                                  {"role", &t.role},
                                                                  {"tenant", &t.tenant},
                                                                  {"node", &t.node},
                                                                  {"description", &t.description}});
        !ok) {
      return ok;
    }
    put(dump({{"type", "token"},
              {"id", t.id},
              {"hash", t.hash},
              {"role", t.role},
              {"tenant", t.tenant},
              {"node", t.node},
              {"description", t.description},
              {"created_ms", t.created_ms},
              {"revoked", t.revoked}}));
  }
  for (const auto& [records, type] :
       {std::pair{&s.nodes, "node"}, std::pair{&s.settings, "setting"}}) {
    for (const KeyedRecord& r : *records) {
      if (auto ok = check_strings(fmt::format("{} {:?}", type, r.key),
                                  {{"key", &r.key}, {"document", &r.document}});
          !ok) {
        return ok;
      }
      put(dump({{"type", type}, {"key", r.key}, {"document", r.document}}));
    }
  }
  for (const LedgerRecord& l : s.ledger) {
    if (auto ok = check_strings(fmt::format("ledger seq {}", l.seq),
                                {{"tenant", &l.tenant}, {"document", &l.document}});
        !ok) {
      return ok;
    }
    put(dump({{"type", "ledger"},
              {"seq", l.seq},
              {"at", l.at},
              {"tenant", l.tenant},
              {"document", l.document}}));
  }
  for (const EventRecord& e : contents.events) {
    if (auto ok = check_strings(fmt::format("event seq {}", e.seq),
                                {{"kind", &e.kind}, {"document", &e.document}});
        !ok) {
      return ok;
    }
    put(dump({{"type", "event"},
              {"seq", e.seq},
              {"at_ms", e.at_ms},
              {"kind", e.kind},
              {"document", e.document}}));
  }
  return {};
}

// --- reading -------------------------------------------------------------------------------------

// The fields of one line's object, read one by one; done() refuses any left unread. Reasons only:
// the caller names the line.
class Fields {
 public:
  // `typed`: the object is a line, whose "type" field its caller read.
  Fields(const Json& object, std::string_view type, bool typed = true)
      : object_(object), type_(type) {
    if (typed) read_.push_back("type");
  }

  Result<std::string> text(const char* name) {
    const Json* value = find(name);
    if (value == nullptr) return missing(name);
    if (!value->is_string()) return wrong(name, "a string");
    return value->get_ref<const std::string&>();
  }
  Result<std::int64_t> integer(const char* name,
                               std::int64_t min = std::numeric_limits<std::int64_t>::min()) {
    const Json* value = find(name);
    if (value == nullptr) return missing(name);
    const std::string expected = min == std::numeric_limits<std::int64_t>::min()
                                     ? std::string("a whole number (64 bits)")
                                     : fmt::format("a whole number >= {}", min);
    if (!value->is_number_integer()) return wrong(name, expected);
    if (value->is_number_unsigned() &&
        value->get<std::uint64_t>() >
            static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return wrong(name, expected);
    }
    const auto number = value->get<std::int64_t>();
    if (number < min) return wrong(name, expected);
    return number;
  }
  Result<bool> flag(const char* name) {
    const Json* value = find(name);
    if (value == nullptr) return missing(name);
    if (!value->is_boolean()) return wrong(name, "true or false");
    return value->get<bool>();
  }
  Result<BackupCounts> counts(const char* name) {
    const Json* value = find(name);
    if (value == nullptr) return missing(name);
    if (!value->is_object()) return wrong(name, "an object of counts");
    Fields inner(*value, fmt::format("{} counts", type_), /*typed=*/false);
    BackupCounts out;
    for (auto [key, target] :
         {std::pair{"jobs", &out.jobs}, std::pair{"tokens", &out.tokens},
          std::pair{"nodes", &out.nodes}, std::pair{"settings", &out.settings},
          std::pair{"ledger", &out.ledger}, std::pair{"events", &out.events}}) {
      auto number = inner.integer(key, 0);
      if (!number) return std::unexpected(number.error());
      *target = *number;
    }
    if (auto ok = inner.done(); !ok) return std::unexpected(ok.error());
    return out;
  }
  // Every field was read (the type too): anything else is a field this version does not know.
  Result<void> done() const {
    if (object_.size() == read_.size()) return {};
    for (const auto& [key, value] : object_.items()) {
      bool known = false;
      for (const char* name : read_) known = known || key == name;
      if (!known) {
        return fail("", fmt::format("{}: unknown field {:?} (version {} has no such field)", type_,
                                    key, kBackupVersion));
      }
    }
    return {};
  }

 private:
  const Json* find(const char* name) {
    read_.push_back(name);
    const auto it = object_.find(name);
    return it == object_.end() ? nullptr : &*it;
  }
  std::unexpected<Error> missing(const char* name) const {
    return fail("", fmt::format("{}: field {:?} is missing", type_, name));
  }
  std::unexpected<Error> wrong(const char* name, std::string_view expected) const {
    return fail("", fmt::format("{}: field {:?} must be {}", type_, name, expected));
  }

  const Json& object_;
  std::string type_;
  std::vector<const char*> read_;
};

// Reads `fields` into `out` in order; the first error is kept.
template <class T>
bool take(Result<T> value, T& out, Result<void>& error) {
  if (!error) return false;
  if (!value) {
    error = std::unexpected(value.error());
    return false;
  }
  out = std::move(*value);
  return true;
}

struct HeaderLine {
  BackupHeader header;
  std::int64_t last_event_seq = 0;
  BackupCounts counts;
};

Result<HeaderLine> read_header(const Json& line) {
  const std::string not_backup = fmt::format(
      "not a Tidepool backup: its first line is not a {:?} header", std::string(kBackupFormat));
  if (!line.is_object()) return fail("", not_backup);
  const auto type = line.find("type");
  const auto format = line.find("format");
  if (type == line.end() || *type != "header" || format == line.end() ||
      *format != std::string(kBackupFormat)) {
    return fail("", not_backup);
  }
  Fields fields(line, "header");
  (void)fields.text("format");
  auto version = fields.integer("version", 0);
  if (!version) return std::unexpected(version.error());
  if (*version != kBackupVersion) {
    return fail("", fmt::format("a backup of version {}, which this tidepool does not read (it "
                                "reads version {}){}",
                                *version, kBackupVersion,
                                *version > kBackupVersion
                                    ? ": it was written by a newer tidepool; restore it with that"
                                    : ""));
  }
  HeaderLine out;
  Result<void> error;
  take(fields.integer("taken_ms", 0), out.header.taken_ms, error);
  take(fields.text("source"), out.header.source, error);
  take(fields.integer("last_event_seq", 0), out.last_event_seq, error);
  take(fields.counts("counts"), out.counts, error);
  if (!error) return std::unexpected(error.error());
  if (auto ok = fields.done(); !ok) return std::unexpected(ok.error());
  return out;
}

// Reads a record line of `section` into `contents`, checking its order against the ones before.
Result<void> read_record(const Json& line, Section section, BackupContents& contents,
                         RecordOrder& order) {
  Fields fields(line, fmt::format("a {} record", section_name(section)));
  Result<void> error;
  std::optional<std::string> broken;
  switch (section) {
    case Section::kJob: {
      JobRecord r;
      take(fields.integer("id"), r.id, error);
      take(fields.text("tenant"), r.tenant, error);
      take(fields.text("queue"), r.queue, error);
      take(fields.text("state"), r.state, error);
      take(fields.text("idempotency_key"), r.idempotency_key, error);
      take(fields.text("document"), r.document, error);
      if (error) broken = order.job(r);
      contents.snapshot.jobs.push_back(std::move(r));
      break;
    }
    case Section::kToken: {
      TokenRecord r;
      take(fields.text("id"), r.id, error);
      take(fields.text("hash"), r.hash, error);
      take(fields.text("role"), r.role, error);
      take(fields.text("tenant"), r.tenant, error);
      take(fields.text("node"), r.node, error);
      take(fields.text("description"), r.description, error);
      take(fields.integer("created_ms"), r.created_ms, error);
      take(fields.flag("revoked"), r.revoked, error);
      if (error) broken = order.token(r);
      contents.snapshot.tokens.push_back(std::move(r));
      break;
    }
    case Section::kNode:
    case Section::kSetting: {
      KeyedRecord r;
      take(fields.text("key"), r.key, error);
      take(fields.text("document"), r.document, error);
      const bool node = section == Section::kNode;
      if (error) broken = node ? order.node(r) : order.setting(r);
      (node ? contents.snapshot.nodes : contents.snapshot.settings).push_back(std::move(r));
      break;
    }
    case Section::kLedger: {
      LedgerRecord r;
      take(fields.integer("seq"), r.seq, error);
      take(fields.integer("at"), r.at, error);
      take(fields.text("tenant"), r.tenant, error);
      take(fields.text("document"), r.document, error);
      if (error) broken = order.ledger(r);
      contents.snapshot.ledger.push_back(std::move(r));
      break;
    }
    case Section::kEvent: {
      EventRecord r;
      take(fields.integer("seq"), r.seq, error);
      take(fields.integer("at_ms"), r.at_ms, error);
      take(fields.text("kind"), r.kind, error);
      take(fields.text("document"), r.document, error);
      if (error) broken = order.event(r);
      contents.events.push_back(std::move(r));
      break;
    }
  }
  if (!error) return error;
  if (auto ok = fields.done(); !ok) return ok;
  if (broken) return fail("", std::move(*broken));
  return {};
}

std::string at_line(std::int64_t line) { return fmt::format("line {}", line); }

// The first difference of two counts, in words ("jobs: 4 here, 5 there"); empty when equal.
std::string count_difference(const BackupCounts& said, const BackupCounts& found) {
  for (auto [name, a, b] :
       {std::tuple{"jobs", said.jobs, found.jobs}, std::tuple{"tokens", said.tokens, found.tokens},
        std::tuple{"nodes", said.nodes, found.nodes},
        std::tuple{"settings", said.settings, found.settings},
        std::tuple{"ledger entries", said.ledger, found.ledger},
        std::tuple{"events", said.events, found.events}}) {
    if (a != b) return fmt::format("{} {}, but the file holds {}", a, name, b);
  }
  return "";
}

}  // namespace

BackupCounts count_records(const BackupContents& contents) {
  const Snapshot& s = contents.snapshot;
  const auto n = [](const auto& records) { return static_cast<std::int64_t>(records.size()); };
  return {n(s.jobs), n(s.tokens), n(s.nodes), n(s.settings), n(s.ledger), n(contents.events)};
}

std::string describe_counts(const BackupCounts& c) {
  const auto plural = [](std::int64_t n, std::string_view one, std::string_view many) {
    return fmt::format("{} {}", n, n == 1 ? one : many);
  };
  return fmt::format(
      "{}, {}, {}, {}, {}, {}", plural(c.jobs, "job", "jobs"), plural(c.tokens, "token", "tokens"),
      plural(c.nodes, "node", "nodes"), plural(c.settings, "setting", "settings"),
      plural(c.ledger, "ledger entry", "ledger entries"), plural(c.events, "event", "events"));
}

Result<void> check_backup_contents(const BackupContents& contents) {
  RecordOrder order;
  const Snapshot& s = contents.snapshot;
  const auto check = [](std::optional<std::string> broken, std::string record) -> Result<void> {
    if (broken) return fail(std::move(record), std::move(*broken));
    return {};
  };
  for (const JobRecord& r : s.jobs) {
    if (auto ok = check(order.job(r), fmt::format("job {}", r.id)); !ok) return ok;
  }
  for (const TokenRecord& r : s.tokens) {
    if (auto ok = check(order.token(r), fmt::format("token {:?}", r.id)); !ok) return ok;
  }
  for (const KeyedRecord& r : s.nodes) {
    if (auto ok = check(order.node(r), fmt::format("node {:?}", r.key)); !ok) return ok;
  }
  for (const KeyedRecord& r : s.settings) {
    if (auto ok = check(order.setting(r), fmt::format("setting {:?}", r.key)); !ok) return ok;
  }
  for (const LedgerRecord& r : s.ledger) {
    if (auto ok = check(order.ledger(r), fmt::format("ledger seq {}", r.seq)); !ok) return ok;
  }
  for (const EventRecord& r : contents.events) {
    if (auto ok = check(order.event(r), fmt::format("event seq {}", r.seq)); !ok) return ok;
  }
  const std::int64_t last = contents.events.empty() ? 0 : contents.events.back().seq;
  if (s.last_event_seq != last) {
    return fail("last_event_seq",
                fmt::format("the snapshot's last event is seq {}, but the backup's is {} (it "
                            "must hold every event kept, up to the last)",
                            s.last_event_seq, last));
  }
  return {};
}

Result<std::string> write_backup(const BackupHeader& header, const BackupContents& contents) {
  if (auto ok = check_backup_contents(contents); !ok) return std::unexpected(ok.error());
  if (!valid_utf8(header.source)) return fail("source", "not valid UTF-8");
  const BackupCounts counts = count_records(contents);
  std::string text;
  Sha256 digest;
  const auto put = [&](const std::string& line) {
    digest.add(line);
    text += line;
  };
  put(dump({{"type", "header"},
            {"format", std::string(kBackupFormat)},
            {"version", kBackupVersion},
            {"taken_ms", header.taken_ms},
            {"source", header.source},
            {"last_event_seq", contents.snapshot.last_event_seq},
            {"counts", counts_json(counts)}}));
  if (auto ok = for_each_record_line(contents, put); !ok) return std::unexpected(ok.error());
  text += dump({{"type", "trailer"}, {"counts", counts_json(counts)}, {"sha256", digest.hex()}});
  return text;
}

Result<std::string> backup_digest(const BackupContents& contents) {
  Sha256 digest;
  if (auto ok = for_each_record_line(contents, [&](const std::string& line) { digest.add(line); });
      !ok) {
    return std::unexpected(ok.error());
  }
  return digest.hex();
}

Result<Backup> read_backup(std::string_view text) {
  if (text.empty()) return fail(at_line(1), "the file is empty: not a Tidepool backup");
  Backup backup;
  HeaderLine header;
  RecordOrder order;
  Sha256 digest;
  std::optional<Section> section;  // of the last record read
  std::optional<std::int64_t> trailer_line;
  std::size_t position = 0;
  std::int64_t number = 0;
  while (position < text.size()) {
    ++number;
    const std::size_t end = text.find('\n', position);
    const bool whole = end != std::string_view::npos;
    const std::string_view line =
        text.substr(position, whole ? end - position : std::string_view::npos);
    const std::string_view with_end =
        text.substr(position, whole ? end + 1 - position : std::string_view::npos);
    position += with_end.size();
    const auto here = [&](Error e) {
      e.field = at_line(number);
      return std::unexpected(std::move(e));
    };
    if (trailer_line) {
      return fail(at_line(number),
                  fmt::format("text after the trailer (line {}), which ends a backup: two files "
                              "joined, or something appended?",
                              *trailer_line));
    }
    const Json value = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (number == 1) {
      auto read = read_header(value.is_discarded() ? Json() : value);
      if (!read) return here(read.error());
      header = std::move(*read);
      backup.header = header.header;
    }
    if (!whole) {
      return fail(at_line(number),
                  "the line is cut short (the file ends without a line end): the file is "
                  "truncated");
    }
    if (number == 1) {
      digest.add(with_end);
      continue;
    }
    if (value.is_discarded() || !value.is_object()) {
      return fail(at_line(number), "not a JSON object: the line is damaged");
    }
    const auto type = value.find("type");
    if (type == value.end() || !type->is_string()) {
      return fail(at_line(number), "the object has no \"type\" string: not a backup record");
    }
    const std::string& name = type->get_ref<const std::string&>();
    if (name == "trailer") {
      Fields fields(value, "the trailer");
      auto counts = fields.counts("counts");
      if (!counts) return here(counts.error());
      auto sha = fields.text("sha256");
      if (!sha) return here(sha.error());
      if (auto ok = fields.done(); !ok) return here(ok.error());
      const BackupCounts found = count_records(backup.contents);
      if (const std::string diff = count_difference(*counts, found); !diff.empty()) {
        return fail(at_line(number), "the trailer counts " + diff);
      }
      if (const std::string diff = count_difference(header.counts, found); !diff.empty()) {
        return fail(at_line(1), "the header counts " + diff);
      }
      const std::int64_t last_event =
          backup.contents.events.empty() ? 0 : backup.contents.events.back().seq;
      if (header.last_event_seq != last_event) {
        return fail(at_line(1), fmt::format("the header's last_event_seq is {}, but the file's "
                                            "last event is seq {} (it must hold every one kept)",
                                            header.last_event_seq, last_event));
      }
      const std::string computed = digest.hex();
      if (*sha != computed) {
        return fail(at_line(number),
                    fmt::format("the SHA-256 of lines 1 to {} is {}, the trailer records {}: the "
                                "file was changed or damaged after it was written",
                                number - 1, computed, *sha));
      }
      trailer_line = number;
      continue;
    }
    digest.add(with_end);
    if (name == "header") return fail(at_line(number), "a second header");
    const auto kind = section_of(name);
    if (!kind) {
      return fail(at_line(number),
                  fmt::format("unknown record type {:?} (version {} has header, job, token, node, "
                              "setting, ledger, event and trailer)",
                              name, kBackupVersion));
    }
    if (section && *kind < *section) {
      return fail(at_line(number),
                  fmt::format("a {} record after the {} records: records come in the order "
                              "jobs, tokens, nodes, settings, ledger, events",
                              name, section_name(*section)));
    }
    section = *kind;
    if (auto ok = read_record(value, *kind, backup.contents, order); !ok) return here(ok.error());
  }
  if (!trailer_line) {
    return fail(at_line(number),
                "the file ends without its trailer line: it is truncated (or was not written to "
                "its end)");
  }
  backup.contents.snapshot.last_event_seq = header.last_event_seq;
  // The line by line checks above are these; a last look keeps reader and writer in step.
  if (auto ok = check_backup_contents(backup.contents); !ok) return std::unexpected(ok.error());
  return backup;
}

}  // namespace tidepool

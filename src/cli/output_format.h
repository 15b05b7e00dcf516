// How the user commands print what the server returned: `-o table` (the default; columns for
// people), `-o json` (the server's JSON, indented) or `-o yaml` (the same data as YAML); listings
// also `-o wide`, `-o name` and `-o csv` (listing.h). And the small formatters the tables share.
// Pure: they build text and read nothing.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace tidepool {

enum class OutputFormat : std::uint8_t { kTable, kWide, kName, kJson, kYaml, kCsv };

// "table", "wide", "name", "json", "yaml", "csv".
std::string_view output_format_name(OutputFormat format);

// The forms each kind of command offers: a listing all of them; a command that reports what it
// did to jobs (submit, cancel) also `name`; the others a table or the reply as a document.
inline constexpr OutputFormat kListingFormats[] = {OutputFormat::kTable, OutputFormat::kWide,
                                                   OutputFormat::kName,  OutputFormat::kJson,
                                                   OutputFormat::kYaml,  OutputFormat::kCsv};
inline constexpr OutputFormat kNamedFormats[] = {OutputFormat::kTable, OutputFormat::kName,
                                                 OutputFormat::kJson, OutputFormat::kYaml};
inline constexpr OutputFormat kDocumentFormats[] = {OutputFormat::kTable, OutputFormat::kJson,
                                                    OutputFormat::kYaml};

// The names of `formats` as a list for people: "table, json or yaml".
std::string output_format_names(std::span<const OutputFormat> formats);

// json and yaml: the server's reply printed as it is.
inline bool is_document(OutputFormat format) {
  return format == OutputFormat::kJson || format == OutputFormat::kYaml;
}

// One of `allowed` by its name; fails naming `field` and the forms allowed.
Result<OutputFormat> parse_output_format(std::string_view name, const std::string& field,
                                         std::span<const OutputFormat> allowed = kListingFormats);

// `value` as a YAML document (block style, keys in the JSON's order, ending with a newline).
// Strings that YAML would read as something else (true, null, 8080, "", "- x") are quoted, so the
// YAML reads back as the same data.
std::string json_to_yaml(const nlohmann::json& value);

// Writes `value` as JSON (indented by 2) or YAML; nothing for kTable (the caller's table).
void write_document(const nlohmann::json& value, OutputFormat format, std::ostream& out);

// Milli-GPUs as GPUs: 8000 -> "8", 500 -> "0.5", 1250 -> "1.25".
std::string format_gpus(std::int64_t milli);

// GPU-seconds as GPU-hours with one decimal: 43200 -> "12.0 GPU-h"; negative as 0.
std::string format_gpu_hours(std::int64_t gpu_seconds);

// 1 -> "1st", 2 -> "2nd", 3 -> "3rd", 11 -> "11th", 22 -> "22nd".
std::string ordinal(std::int64_t n);

// A JSON number of GPUs (integer or decimal, as the server writes them) as format_gpus does;
// null -> `null_text`.
std::string format_gpu_value(const nlohmann::json& value, std::string_view null_text = "-");

// Milliseconds since the epoch as local time "2024-05-01 13:04:05"; 0 -> "-".
std::string format_local_time(std::int64_t epoch_ms);

// Node names in Slurm's compressed form, sorted and without repeats: names that differ only in a
// trailing number of the same width share a prefix: {h100-a-01, h100-a-02, h100-a-04, cpu-login}
// -> "cpu-login,h100-a-[01-02,04]".
std::string compress_node_names(std::vector<std::string> names);

// The inverse, as Slurm's hostlists read: "h100-a-[01-03,05],cpu-login" -> h100-a-01, h100-a-02,
// h100-a-03, h100-a-05, cpu-login, in that order (a number keeps the width written: [8-10] is 8,
// 9, 10; [08-10] is 08, 09, 10). Several bracketed parts multiply ("r[1-2]-n[1-2]"). At most
// kMaxExpandedNodes names; an Error names `field` for a bracket left open, an empty item, a range
// that ends before it starts, or too many names.
inline constexpr std::size_t kMaxExpandedNodes = 100'000;
Result<std::vector<std::string>> expand_node_names(std::string_view text, const std::string& field);

}  // namespace tidepool

// How the user commands print what the server returned: `-o table` (the default; columns for
// people), `-o json` (the server's JSON, indented) or `-o yaml` (the same data as YAML), and the
// small formatters the tables share. Pure: they build text and read nothing.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace tidepool {

enum class OutputFormat : std::uint8_t { kTable, kJson, kYaml };

// "table", "json" or "yaml"; fails naming `field`.
Result<OutputFormat> parse_output_format(std::string_view name, const std::string& field);

// `value` as a YAML document (block style, keys in the JSON's order, ending with a newline).
// Strings that YAML would read as something else (true, null, 8080, "", "- x") are quoted, so the
// YAML reads back as the same data.
std::string json_to_yaml(const nlohmann::json& value);

// Writes `value` as JSON (indented by 2) or YAML; nothing for kTable (the caller's table).
void write_document(const nlohmann::json& value, OutputFormat format, std::ostream& out);

// A span of seconds as kubectl shows ages: "45s", "3m", "3m20s" below 10 minutes, "2h5m", "3d4h",
// "400d"; negative spans as "0s".
std::string format_age(std::int64_t seconds);

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

}  // namespace tidepool

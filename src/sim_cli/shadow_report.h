// The report of `tidepool shadow` (sim/shadow_schedule.h): every job once, with the observed
// scheduler's start, wait and nodes beside Tidepool's, and the summary figures of both. Three
// forms: a text table for people, JSON (the whole report) and CSV (one row per job). Pure: it
// builds text and reads nothing.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "sim/shadow_schedule.h"

namespace tidepool {

// What the report says about where its figures came from.
struct ShadowReportContext {
  std::string observed = "slurm";  // who made the observed schedule ("slurm", or "observed")
  std::string source;              // "squeue" / "squeue + sacct" / the trace file
  std::string policy;
  std::string tenants_file;  // where the tenants came from; empty: derived from the stream
  ShadowShare share;
  int nodes = 0;
  std::int64_t gpus = 0;
  bool job_rows = true;  // the text form lists every job (else the summary only)
};

// A task's place as "tp1:0-1" (its GPUs "0,2-3"); a job's places joined by spaces:
// "tp1:0-3 tp2:0-3".
std::string places_text(std::span<const ShadowPlace> places);

std::string shadow_report_text(const ShadowRun& run, std::span<const ObservedJob> jobs,
                               const ShadowReportContext& context);
nlohmann::json shadow_report_json(const ShadowRun& run, std::span<const ObservedJob> jobs,
                                  const ShadowReportContext& context);
std::string shadow_report_csv(const ShadowRun& run, std::span<const ObservedJob> jobs);

}  // namespace tidepool

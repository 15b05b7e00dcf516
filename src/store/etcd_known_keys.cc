#include "store/etcd_known_keys.h"

#include <utility>

#include "store/etcd_records.h"

namespace tidepool {

EtcdKnownKeys::EtcdKnownKeys(etcd_keys::Layout layout, bool job_key_index_in_memory)
    : layout_(std::move(layout)),
      job_key_index_in_memory_(job_key_index_in_memory),
      wanted_{layout_.jobs(), layout_.tokens(), layout_.indexes(), layout_.meta()} {}

bool EtcdKnownKeys::wanted(const std::string& key) const {
  for (const etcd_keys::KeyRange& range : wanted_) {
    if (key >= range.begin && key < range.end) return true;
  }
  return false;
}

namespace {

// What is kept of a job: its tenant and idempotency key, as a stored job.
std::string job_summary(const JobRecord& job) {
  JobRecord summary;
  summary.tenant = job.tenant;
  summary.idempotency_key = job.idempotency_key;
  return etcd_records::encode(summary);
}

}  // namespace

std::string EtcdKnownKeys::kept(const std::string& key, const std::string& value) const {
  const etcd_keys::KeyRange jobs = layout_.jobs();
  if (key < jobs.begin || key >= jobs.end) return value;
  auto job = etcd_records::decode_job(0, key, value);
  if (!job) return value;  // the plan reports it
  return job_summary(*job);
}

void EtcdKnownKeys::keep(const std::string& key, const etcd_plan::ReadValue& value) {
  if (value.mod_revision == 0 && complete_) {
    values_.erase(key);  // absent, as every key not held
  } else {
    values_[key] = etcd_plan::ReadValue{kept(key, value.value), value.mod_revision};
  }
}

std::vector<std::string> EtcdKnownKeys::lookup(const std::vector<std::string>& keys,
                                               etcd_plan::ReadState& state) const {
  std::vector<std::string> unknown;
  for (const std::string& key : keys) {
    const auto known = values_.find(key);
    if (known == values_.end()) {
      if (!complete_) unknown.push_back(key);
    } else if (known->second.mod_revision != 0) {
      state[key] = known->second;
    }
  }
  return unknown;
}

void EtcdKnownKeys::learn(const std::vector<std::string>& keys, const etcd_plan::ReadState& read) {
  for (const std::string& key : keys) {
    if (!wanted(key)) continue;
    const auto found = read.find(key);
    keep(key, found == read.end() ? etcd_plan::ReadValue{} : found->second);
  }
}

void EtcdKnownKeys::restart() { forget(); }

void EtcdKnownKeys::found(const std::string& key, const std::string& value,
                          std::int64_t mod_revision) {
  if (job_key_index_in_memory_) {
    const etcd_keys::KeyRange index = layout_.job_key_indexes();
    if (key >= index.begin && key < index.end) return;  // derived from the jobs instead
  }
  if (wanted(key)) values_[key] = etcd_plan::ReadValue{kept(key, value), mod_revision};
}

void EtcdKnownKeys::found_job(const std::string& key, const JobRecord& job,
                              std::int64_t mod_revision) {
  values_[key] = etcd_plan::ReadValue{job_summary(job), mod_revision};
  if (job_key_index_in_memory_ && !job.idempotency_key.empty()) {
    values_[layout_.job_key_index(job.tenant, job.idempotency_key)] =
        etcd_plan::ReadValue{std::to_string(job.id), mod_revision};
  }
}

void EtcdKnownKeys::committed(const etcd_plan::Plan& plan, std::int64_t revision) {
  for (const auto& [key, value] : plan.writes) {
    if (!wanted(key)) continue;
    keep(key, value ? etcd_plan::ReadValue{*value, revision} : etcd_plan::ReadValue{});
  }
}

void EtcdKnownKeys::forget() {
  values_.clear();
  complete_ = false;
}

}  // namespace tidepool

// The tenants file: the tenant tree org > tenant > team queue with quotas per GPU model, as YAML.
// Reading it gives what TenantBook::create takes.
//
// Example (data/tenants/example.yaml is a complete one):
//
//   orgs:
//     - name: research
//       quota:                      # optional caps over the org's tenants, per model
//         H100: {guaranteed_gpus: 96, borrowing_limit_gpus: 16}
//       tenants:
//         - name: search
//           weight: 2
//           quota:
//             H100: {guaranteed_gpus: 64, borrowing_limit_gpus: 32, lending_limit_gpus: 64}
//             A100: {guaranteed_gpus: 16}
//           queues: [ranking, retrieval]
//
// Keys:
//   order                 optional: the order of each tenant's own jobs when the tenant names none,
//                         "fifo", "las" (least attained service first) or "srpt" (shortest
//                         predicted remaining GPU-time first); see core/lane_order.h (default:
//                         the scheduler's, las).
//   orgs                  required, a non-empty list.
//   orgs[].name           required, non-empty, unique among orgs.
//   orgs[].tenants        required, a list (an org may be empty; the file must have a tenant).
//   orgs[].quota          optional map from GPU model name to caps over the org's tenants:
//                         guaranteed_gpus (its tenants' guarantees may sum to at most this),
//                         borrowing_limit_gpus (from other orgs), lending_limit_gpus (to other
//                         orgs); each optional (absent: no cap).
//   tenants[].name        required, non-empty, unique among all tenants.
//   tenants[].weight      optional fair-share weight, an integer 1..kMaxTenantWeight (default 1).
//   tenants[].order       optional order of the tenant's own jobs, as `order` above.
//   tenants[].quota       optional map from GPU model name to guaranteed_gpus (default 0),
//                         borrowing_limit_gpus (default unlimited) and lending_limit_gpus (default
//                         the guarantee; at most the guarantee).
//   tenants[].queues      optional list of team queue names, unique within the tenant (default:
//                         one queue, "default").
//   tenants[].max_pending_jobs, tenants[].submissions_per_second
//                         optional admission limits of the server, integers 1..10000000 (default:
//                         the server configuration's `admission:`); the simulator ignores them.
// GPU figures are GPUs with up to 3 decimals ("0.5"), stored as milli-GPUs; see core/tenants.h for
// what they mean. Model names are interned into the catalog passed in, in order of first
// appearance (also when the file then fails to read). Unknown or repeated keys are errors, and so
// is a file with more than one YAML document.
//
// Errors: the Error's field is "<source>:<line>:<column> <path>", the path in the YAML tree of the
// bad value (e.g. "tenants.yaml:9:41 orgs[0].tenants[0].quota.H100.lending_limit_gpus"); the
// reason says what is wrong. No exception escapes these functions. A TenantsSpec that reads
// without error is accepted by TenantBook::create with the same catalog.
#pragma once

#include <string>
#include <string_view>

#include "core/error.h"
#include "core/gpu_model.h"
#include "core/tenants.h"

namespace tidepool {

// Parses a tenants file's text; `source` names it in errors (a path, or e.g. "<stdin>").
Result<TenantsSpec> read_tenants_yaml(std::string_view text, const std::string& source,
                                      GpuModelCatalog& models);

// Reads and parses the file at `path`.
Result<TenantsSpec> load_tenants_yaml(const std::string& path, GpuModelCatalog& models);

}  // namespace tidepool

#!/usr/bin/env bash
# Checks the Grafana dashboards of deploy/grafana/dashboards: each is a dashboard Grafana can
# provision (a unique uid, a title, the `datasource` variable every panel and query uses, panels
# with ids, a place on the 24-column grid and at least one query), and every query is PromQL that
# promtool parses (the template variables $tenant and $node read as any value).
# Usage: tests/check_dashboards.sh REPO_ROOT
set -euo pipefail
root="${1:?usage: check_dashboards.sh REPO_ROOT}"
work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT

python3 - "${root}/deploy/grafana/dashboards" "${work}/queries.yml" <<'PY'
import glob, json, os, sys
folder, rules_path = sys.argv[1], sys.argv[2]
files = sorted(glob.glob(os.path.join(folder, "*.json")))
problems, rules, uids = [], [], {}
if len(files) < 4:
    problems.append(f"{folder}: {len(files)} dashboards, expected pool, tenants, GPU health and market")
for path in files:
    name = os.path.basename(path)
    try:
        d = json.load(open(path))
    except ValueError as e:
        problems.append(f"{name}: not JSON: {e}")
        continue
    for key in ("uid", "title", "panels", "templating", "schemaVersion"):
        if key not in d:
            problems.append(f"{name}: no {key}")
    uid = d.get("uid", "")
    if uid in uids:
        problems.append(f"{name}: uid {uid} also in {uids[uid]}")
    uids[uid] = name
    variables = [v.get("name") for v in d.get("templating", {}).get("list", [])]
    if "datasource" not in variables:
        problems.append(f"{name}: no datasource variable")
    ids = set()
    for panel in d.get("panels", []):
        title = panel.get("title", "?")
        where = f"{name}: panel {title!r}"
        if panel.get("id") in ids:
            problems.append(f"{where}: id {panel.get('id')} used twice")
        ids.add(panel.get("id"))
        grid = panel.get("gridPos", {})
        if not all(k in grid for k in "xywh") or grid.get("x", 0) + grid.get("w", 0) > 24:
            problems.append(f"{where}: gridPos {grid} is not on the 24-column grid")
        if panel.get("datasource", {}).get("uid") != "${datasource}":
            problems.append(f"{where}: its datasource is not ${{datasource}}")
        targets = panel.get("targets", [])
        if not targets:
            problems.append(f"{where}: no query")
        for t in targets:
            expr = t.get("expr", "")
            if not expr:
                problems.append(f"{where}: an empty query")
                continue
            if t.get("datasource", {}).get("uid") != "${datasource}":
                problems.append(f"{where}: a query's datasource is not ${{datasource}}")
            for var in ("$tenant", "$node"):
                expr = expr.replace(var, ".*")
            # Named after its panel, so that promtool's error says which one.
            rules.append({"record": f"dashboard:query:{len(rules)}", "expr": expr,
                          "labels": {"panel": where}})
with open(rules_path, "w") as out:
    json.dump({"groups": [{"name": "dashboards", "rules": rules}]}, out)
if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"{len(files)} dashboards, {len(rules)} queries")
PY
# promtool reads the rules file as YAML, of which JSON is a part.
if ! promtool check rules "${work}/queries.yml"; then
  echo "check_dashboards: a query above is not PromQL; the panels by rule number:" >&2
  python3 -c 'import json, sys
for r in json.load(open(sys.argv[1]))["groups"][0]["rules"]:
    print(r["record"], "=", r["labels"]["panel"])' "${work}/queries.yml" >&2
  exit 1
fi

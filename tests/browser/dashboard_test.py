#!/usr/bin/env python3
"""The web dashboard in a real browser (headless Chromium driven by Selenium) against a real
server.

usage: dashboard_test.py TIDEPOOL SOURCE_DIR SCREENSHOT_DIR CASE
  views  a server with agents of fake GPUs, a market and jobs: signs in, checks each view's
         figures against the API's for the same moment, follows a job's log, cancels it, sees a
         user token refused another tenant's job; a screenshot of each view in SCREENSHOT_DIR
  scale  1,000 nodes (8,000 GPUs) and 10,000 jobs: the pool view's first paint and update cycle
         (the browser's performance API), written to SCREENSHOT_DIR/scale.json and checked
         against their budgets times $TIDEPOOL_BROWSER_BUDGET_SLACK (default 1)
"""

import json
import os
import sys
import time

from selenium.webdriver.common.by import By

from harness import Failure, Pool, check, chromium, console_errors, wait_until

# Text that would be markup if a page did not escape it (a drain reason, a job's command).
HOSTILE = "<img src=x class=injected><b>fan</b>"

# The largest script time one pool update may take, and the first paint of the pool view (ms).
UPDATE_BUDGET_MS = 200
FIRST_PAINT_BUDGET_MS = 1000
# How far over those budgets the scale case may go before it fails: 1 when it runs alone (the
# benchmark, bench/dashboard/run.sh); the test suite, where it shares the processors with other
# tests, sets more (tests/CMakeLists.txt), so that only a gross regression fails it there.
BUDGET_SLACK_VARIABLE = "TIDEPOOL_BROWSER_BUDGET_SLACK"


def budget_slack():
    text = os.environ.get(BUDGET_SLACK_VARIABLE, "1")
    try:
        slack = float(text)
    except ValueError:
        slack = 0
    if not 1 <= slack < float("inf"):  # NaN fails too
        raise Failure(f"{BUDGET_SLACK_VARIABLE}={text!r}: not a factor of at least 1")
    return slack


def sign_in(driver, base, token):
    driver.get(base + "/")
    wait_until("the sign-in form", lambda: driver.find_element(By.ID, "token").is_displayed())
    field = driver.find_element(By.ID, "token")
    field.clear()
    field.send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#signin button[type=submit], #signin button").click()
    wait_until("the pool view after signing in",
               lambda: driver.find_element(By.CSS_SELECTOR, "main#view[data-view=pool]"))


def show(driver, view, name=None):
    """Goes to `#/view` and waits until it rendered its data."""
    driver.execute_script("location.hash = arguments[0]", "#/" + view)
    name = name or view.split("/")[0]
    wait_until(f"the {name} view",
               lambda: driver.find_element(By.CSS_SELECTOR, f"main#view[data-view='{name}']"))


def updates(driver):
    return int(driver.execute_script("return document.body.dataset.updates || '0'"))


def wait_for_refresh(driver):
    """Waits for the next completed refresh of the current view."""
    seen = updates(driver)
    wait_until("a refresh of the view", lambda: updates(driver) > seen, 15)


def screenshot(driver, directory, name):
    path = os.path.join(directory, name + ".png")
    driver.save_screenshot(path)
    print(f"screenshot: {path}")


def cells_by_node(driver):
    """{node: [(tenant, job), ...]} of the pool view's GPU cells, read in one script."""
    return driver.execute_script("""
        const out = {};
        for (const node of document.querySelectorAll('.node[data-node]')) {
          out[node.dataset.node] = [...node.querySelectorAll('.gpu')].map(
              c => [c.dataset.tenant || '', c.dataset.job || '']);
        }
        return out;""")


def check_no_markup(driver):
    check(not driver.find_elements(By.CSS_SELECTOR, ".injected, main#view img"),
          "text from the API became markup")


def check_pool_view(driver, api):
    pool = api.get("/v1/pool")
    shown = cells_by_node(driver)
    names = [t["name"] for t in pool["tenants"]]
    nodes = [n for s in pool["spines"] for leaf in s["leaves"] for n in leaf["nodes"]]
    nodes += pool["rented"]
    check(len(shown) == len(nodes), f"{len(shown)} nodes drawn, the API has {len(nodes)}")
    for node in nodes:
        cells = shown.get(node["name"])
        check(cells is not None, f"node {node['name']} is not drawn")
        check(len(cells) == node["gpus"],
              f"{node['name']}: {len(cells)} GPU cells, the API says {node['gpus']} GPUs")
        for index, shares in enumerate(node["cells"]):
            tenant, job = cells[index]
            if not shares:
                check(tenant == "" and job == "", f"{node['name']} GPU {index} is free, drawn "
                      f"as {tenant} {job}")
                continue
            first = shares[0]
            want = names[first["tenant"]] if first["tenant"] >= 0 else "(other)"
            check(tenant == want, f"{node['name']} GPU {index}: tenant {tenant}, API {want}")
            if "job" in first:
                check(job == str(first["job"]), f"{node['name']} GPU {index}: job {job}, "
                      f"API {first['job']}")
    # One colour per tenant: the first cell of each tenant, compared by computed colour.
    colours = driver.execute_script("""
        const seen = {};
        for (const c of document.querySelectorAll('.gpu[data-tenant]')) {
          const t = c.dataset.tenant;
          if (t && !(t in seen)) seen[t] = getComputedStyle(c).backgroundColor;
        }
        return seen;""")
    drawn = {t: c for t, c in colours.items() if t not in ("", "(other)")}
    check(len(set(drawn.values())) == len(drawn), f"tenants share a colour: {drawn}")
    # The figures on the page are the API's.
    f = pool["figures"]
    for name, value, sub in (
            ("free", f"{f['free_gpus']:,}", None),
            ("fragmented", f"{f['fragmented_gpus']:,}", None),
            ("nodes", f"{f['nodes_ready']:,} / {f['nodes']:,}",
             f"{f['nodes_not_ready']:,} not ready · {f['nodes_drained']:,} drained"),
            ("jobs", f"{f['jobs_running']:,}", f"{f['jobs_pending']:,} pending")):
        figure = driver.find_element(By.CSS_SELECTOR, f".figure[data-figure='{name}']")
        shown = figure.find_element(By.CSS_SELECTOR, ".fig-value").text.strip()
        check(shown == value, f"figure {name}: the page says {shown!r}, the API {value!r}")
        if sub:
            shown = figure.find_element(By.CSS_SELECTOR, ".fig-sub").text.strip()
            check(shown == sub, f"figure {name}: the page says {shown!r}, the API {sub!r}")
    return pool


def views_case(tidepool, source, shots):
    pool = Pool(tidepool, [
        f"cluster: {source}/data/clusters/example.yaml",
        f"tenants: {source}/data/tenants/example.yaml",
        f"market: {source}/data/market/example.yaml",
        "tick: 1s",
        "simulate_unregistered_nodes: false",
    ])
    driver = None
    try:
        api = pool.admin
        for node in ("h100-a-01", "h100-a-02"):
            pool.start_agent(node)
        wait_until("the agents registered", lambda: sum(
            n["state"] == "ready" for n in api.get("/v1/nodes")["nodes"]) == 2, 60)
        # A hostile reason: the pages show it as text, never as markup.
        api.post("/v1/nodes/h100-b-01/drain", {"reason": HOSTILE})
        talker = api.post("/v1/jobs", {
            "name": "talker", "tenant": "vision", "queue": "default", "gpus_per_task": 4,
            "command": ["bash", "-c", "for i in $(seq 1 100000); do echo step $i; sleep 0.2; done",
                        HOSTILE]})
        api.post("/v1/jobs", {"name": "notebook", "tenant": "search", "queue": "ranking",
                              "gpus_per_task": 1, "gpu_milli": 500,
                              "command": ["sleep", "3600"]})
        api.post("/v1/jobs", {"name": "ctr-train", "tenant": "ads", "queue": "ctr",
                              "gpus_per_task": 8, "command": ["sleep", "3600"]})
        waiting = api.post("/v1/jobs", {"name": "big-run", "tenant": "vision",
                                        "queue": "detection", "tasks": 2, "gpus_per_task": 8,
                                        "command": ["sleep", "3600"]})
        wait_until("three jobs running", lambda: len(
            api.get("/v1/jobs?state=running")["jobs"]) == 3, 60)

        driver = chromium(1440, 1000)
        sign_in(driver, pool.base, api.token)
        wait_for_refresh(driver)
        check_pool_view(driver, api)
        wait_until("the drain reason shown as text", lambda: HOSTILE in driver.find_element(
            By.CSS_SELECTOR, ".node[data-node='h100-b-01']").text)
        check_no_markup(driver)
        screenshot(driver, shots, "pool")

        # Queues: the waiting job with its reason, as the API gives it.
        show(driver, "queues")
        why = api.get(f"/v1/jobs/{waiting['id']}/why")
        row = wait_until("the waiting job's row", lambda: driver.find_element(
            By.CSS_SELECTOR, f".pending-job[data-job='{waiting['id']}']"))
        check(row.get_attribute("data-kind") == why["kind"],
              f"kind {row.get_attribute('data-kind')} on the page, {why['kind']} in the API")
        check(why["reason"][:40] in row.text, f"the row {row.text!r} lacks {why['reason']!r}")
        check_no_markup(driver)
        screenshot(driver, shots, "queues")

        # Tenants: each tenant's used GPUs as the API has them.
        show(driver, "tenants")
        for tenant in api.get("/v1/tenants")["tenants"]:
            for model, quota in tenant["quota"].items():
                cell = driver.find_element(
                    By.CSS_SELECTOR, f"section.tenant[data-tenant='{tenant['name']}'] "
                    f"tr[data-model='{model}'] [data-figure=used]")
                check(cell.text.strip().split()[0] == str(quota["used_gpus"]),
                      f"{tenant['name']} {model} used: page {cell.text!r}, API {quota['used_gpus']}")
        # Their charts are the server's history: the last sample of each line is the API's.
        history = api.get("/v1/history?series=guaranteed_milli_gpus,used_milli_gpus&step=5m")
        for tenant in ("search", "ads"):
            want = {}
            for series in history["series"]:
                if series["labels"].get("tenant") == tenant and series["points"]:
                    label = series["name"].split("_")[0]
                    at, value = series["points"][-1]
                    want[label] = want.get(label, 0) + value / 1000
            drawn = wait_until(f"{tenant}'s chart", lambda: driver.execute_script("""
                const canvas = document.querySelector(`canvas[data-chart='tenant-${arguments[0]}']`);
                const chart = canvas && Chart.getChart(canvas);
                if (!chart) return null;
                const out = {};
                for (const d of chart.data.datasets) {
                  if (d.data.length) out[d.label] = d.data[d.data.length - 1].y;
                }
                return Object.keys(out).length ? out : null;""", tenant))
            for label, value in want.items():
                check(abs(drawn.get(label, 0) - value) < 1e-6,
                      f"{tenant}'s {label} chart ends at {drawn.get(label)}, the history at {value}")
        screenshot(driver, shots, "tenants")

        # Money: the prices on the page are the API's. A price moves with the pool's use (the
        # jobs above just started), and the page follows at its next refresh: wait for it.
        show(driver, "money")
        for name in [m["model"] for m in api.get("/v1/prices")["models"]]:
            def shows_the_api_price(name=name):
                model = next(m for m in api.get("/v1/prices")["models"] if m["model"] == name)
                cell = driver.find_element(
                    By.CSS_SELECTOR, f".prices-table tr[data-model='{name}'] [data-class=standard]")
                return f"{model['per_gpu_hour']['standard']:.2f}" in cell.text
            wait_until(f"{name}'s standard price on the page as the API gives it",
                       shows_the_api_price)
        # The bill's total is the API's, and the CSV link is ready.
        tenant = driver.find_element(By.ID, "bill-tenant").get_attribute("value")
        link = wait_until("the CSV download", lambda: driver.find_element(
            By.ID, "download-csv").get_attribute("download"))
        check(link.startswith(f"bill-{tenant}-") and link.endswith(".csv"), f"CSV name {link}")
        parts = link[:-4].split("-")
        day_from, day_to, by = "-".join(parts[-7:-4]), "-".join(parts[-4:-1]), parts[-1]
        bill = api.get(f"/v1/bill?tenant={tenant}&from={day_from}&to={day_to}&by={by}")
        total = driver.find_element(By.CSS_SELECTOR, "tr.bill-total").text
        check(f"{bill['total']['net']:.2f}" in total,
              f"bill total: page {total!r}, API {bill['total']['net']}")
        screenshot(driver, shots, "money")

        # Job: its log lines arrive while it runs; cancel it.
        show(driver, f"job/{talker['id']}", "job")
        log = wait_until("the job's log", lambda: driver.find_element(
            By.CSS_SELECTOR, "pre.log[data-task='0']"))
        lines = wait_until("log lines", lambda: log.text.count("step") or None, 30)
        wait_until("more log lines (the log follows the task)",
                   lambda: log.text.count("step") > lines, 30)
        state = driver.find_element(By.CSS_SELECTOR, ".view-head .state").get_attribute(
            "data-state")
        check(state == "running", f"the job's state on the page: {state}")
        check(HOSTILE in driver.find_element(By.CSS_SELECTOR, "main#view").text,
              "the job's command is not shown")
        check_no_markup(driver)
        screenshot(driver, shots, "job")
        driver.find_element(By.ID, "cancel-job").click()
        wait_until("the confirmation", lambda: "really" in driver.find_element(
            By.ID, "cancel-job").text.lower())
        driver.find_element(By.ID, "cancel-job").click()
        wait_until("the job cancelled", lambda: api.get(
            f"/v1/jobs/{talker['id']}")["state"] == "cancelled", 30)
        wait_until("the page shows it cancelled", lambda: "cancelled" in driver.find_element(
            By.CSS_SELECTOR, "main#view").text)

        # Events: live, newest first, with the cancellation.
        show(driver, "events")
        wait_until("the cancellation among the events", lambda: driver.find_elements(
            By.CSS_SELECTOR, "tr.event[data-kind='job.cancelled']"))
        # Every event the API has up to the newest on the page is there, newest first.
        shown = [(int(row.get_attribute("data-seq")), row.get_attribute("data-kind"))
                 for row in driver.find_elements(By.CSS_SELECTOR, "tr.event")]
        check(shown == sorted(shown, reverse=True), "the events are not newest first")
        listed = api.get("/v1/events?since=0&timeout=0s")["events"]
        want = [(e["seq"], e["kind"]) for e in listed if e["seq"] <= shown[0][0]]
        check(sorted(shown) == want, f"the page shows events {shown}, the API {want}")
        screenshot(driver, shots, "events")

        errors = console_errors(driver)
        check(not errors, f"the console has errors: {errors}")

        # A user of search: another tenant's job is not found, its cells are anonymous.
        search = api.token_for("user", "search")
        driver.find_element(By.ID, "signout").click()
        sign_in(driver, pool.base, search)
        wait_for_refresh(driver)
        shown = cells_by_node(driver)
        tenants = {t for cells in shown.values() for t, _ in cells}
        check(tenants <= {"", "search", "(other)"}, f"a search user sees tenants {tenants}")
        show(driver, f"job/{waiting['id']}", "job")
        wait_until("another tenant's job refused",
                   lambda: driver.find_element(By.CSS_SELECTOR, "main#view .not-found"))
        screenshot(driver, shots, "job-refused")

        # A wall screen.
        driver.set_window_size(2560, 1440)
        show(driver, "pool")
        wait_for_refresh(driver)
        screenshot(driver, shots, "pool-wall")
        # The refused job's 404 is the one error the console may show.
        refused = f"/v1/jobs/{waiting['id']} "
        errors = [e for e in console_errors(driver) if not (refused in e and "404" in e)]
        check(not errors, f"the console has errors: {errors}")
    except Failure:
        print(pool.log("server.log"), file=sys.stderr)
        for name in sorted(os.listdir(pool.work)):
            if name.startswith("agent-"):
                print(name, pool.log(name), file=sys.stderr)
        raise
    finally:
        if driver is not None:
            driver.quit()
        pool.close()


def measure_view(driver, view, name, between=None, cycles=3):
    """Goes to a view: the time from the click to its first paint, and its next updates' script
    times (ms), from the browser's performance entries. `between`, if given, runs before each
    update is awaited (what makes a view that waits on events update)."""
    clicked = driver.execute_script("return performance.now()")
    show(driver, view, name)
    for _ in range(cycles):
        seen = updates(driver)
        if between:
            between()
        wait_until(f"a refresh of the {name} view", lambda: updates(driver) > seen, 15)
    first = driver.execute_script(
        "const m = performance.getEntriesByName(arguments[0]); return m[m.length - 1].startTime",
        f"tp:{name}:first") - clicked
    updates_ms = driver.execute_script(
        "return performance.getEntriesByName(arguments[0]).filter(e => e.startTime > arguments[1])"
        ".map(e => e.duration)", f"tp:{name}:update", clicked)
    return first, updates_ms


def scale_files(work):
    """A cluster of 1,000 nodes of 8 H100 (10 spines x 5 leaves x 20 nodes) and 8 tenants."""
    cluster = os.path.join(work, "cluster.yaml")
    with open(cluster, "w", encoding="utf-8") as out:
        out.write("site: big\nspines:\n")
        for s in range(10):
            out.write(f"  - name: spine-{s}\n    leaves:\n")
            for leaf in range(5):
                out.write(f"      - name: leaf-{s}-{leaf}\n        nodes:\n"
                          f"          - name: n{s}{leaf}\n            count: 20\n"
                          "            gpu_model: H100\n            gpus: 8\n"
                          "            cpus: 96\n            memory_gib: 1024\n")
    tenants = os.path.join(work, "tenants.yaml")
    with open(tenants, "w", encoding="utf-8") as out:
        out.write("orgs:\n  - name: all\n    tenants:\n")
        for t in range(8):
            out.write(f"      - name: team-{t}\n        quota:\n"
                      "          H100: {guaranteed_gpus: 1000, borrowing_limit_gpus: 1000}\n"
                      "        queues: [default]\n")
    return cluster, tenants


def scale_case(tidepool, shots):
    import tempfile
    slack = budget_slack()
    work = tempfile.mkdtemp(prefix="tidepool-browser-scale.")
    cluster, tenants = scale_files(work)
    pool = Pool(tidepool, [f"cluster: {cluster}", f"tenants: {tenants}", "tick: 1s",
                           "simulate_unregistered_nodes: true"])
    driver = None
    try:
        api = pool.admin
        # 10,000 jobs: 8,000 one-GPU jobs run (every GPU), 2,000 wait.
        for t in range(8):
            api.post("/v1/jobs", {"name": f"sweep-{t}", "tenant": f"team-{t}",
                                  "array": "0-1249", "gpus_per_task": 1,
                                  "command": ["sleep", "3600"]})
        wait_until("8,000 GPUs allocated", lambda: api.get("/v1/pool")["figures"][
            "allocated_milli"] == 8_000_000, 120, 0.5)
        driver = chromium(1920, 1080)
        sign_in(driver, pool.base, api.token)
        # The first paint of a fresh load, signed in (the token is in the tab's session
        # storage): from navigation to the pool drawn.
        driver.refresh()
        wait_until("the pool view", lambda: driver.execute_script(
            "return performance.getEntriesByName('tp:pool:first').length"), 60)
        first_paint = driver.execute_script(
            "return performance.getEntriesByName('tp:pool:first')[0].startTime")
        cells = driver.execute_script("return document.querySelectorAll('.node .gpu').length")
        check(cells == 8000, f"{cells} GPU cells drawn, not 8000")
        # Five update cycles.
        for _ in range(5):
            wait_for_refresh(driver)
        durations = driver.execute_script(
            "return performance.getEntriesByName('tp:pool:update').map(e => e.duration)")
        check(len(durations) >= 5, f"{len(durations)} update cycles measured")
        screenshot(driver, shots, "scale-pool")
        # Every other view at that scale: from the click to its first paint, then its updates
        # (the queues: 2,000 pending and 8,000 running jobs; the events: the last 500 of 18,000).
        figures = {
            "nodes": 1000, "gpus": 8000, "jobs": 10000,
            "pool_first_paint_ms": round(first_paint, 1),
            "pool_update_ms": [round(d, 1) for d in durations],
        }
        running = api.get("/v1/jobs?state=running&limit=1")["jobs"][0]["id"]
        for view, name in (("queues", "queues"), ("tenants", "tenants"),
                           (f"job/{running}", "job"), ("events", "events")):
            # The events view updates when events come: 200 jobs submitted while it waits.
            submit = None if name != "events" else lambda: api.post("/v1/jobs", {
                "name": "more", "tenant": "team-0", "array": "0-199", "gpus_per_task": 1,
                "command": ["sleep", "3600"]})
            first, view_updates = measure_view(driver, view, name, submit)
            figures[f"{name}_first_paint_ms"] = round(first, 1)
            figures[f"{name}_update_ms"] = [round(d, 1) for d in view_updates]
            screenshot(driver, shots, f"scale-{name}")
        with open(os.path.join(shots, "scale.json"), "w", encoding="utf-8") as out:
            json.dump(figures, out, indent=2)
        print(json.dumps(figures, indent=2))
        check(first_paint < FIRST_PAINT_BUDGET_MS * slack,
              f"first paint of the pool view took {first_paint:.0f} ms (budget "
              f"{FIRST_PAINT_BUDGET_MS} ms, x{slack:g} allowed)")
        for name, value in figures.items():
            if name.endswith("_update_ms") and value:
                check(max(value) < UPDATE_BUDGET_MS * slack,
                      f"{name}: an update took {max(value):.0f} ms of script time (budget "
                      f"{UPDATE_BUDGET_MS} ms, x{slack:g} allowed)")
    finally:
        if driver is not None:
            driver.quit()
        pool.close()
        import shutil
        shutil.rmtree(work, ignore_errors=True)


def main():
    if len(sys.argv) != 5 or sys.argv[4] not in ("views", "scale"):
        print(__doc__, file=sys.stderr)
        return 2
    tidepool, source, shots, case = sys.argv[1:]
    os.makedirs(shots, exist_ok=True)
    started = time.monotonic()
    try:
        if case == "views":
            views_case(tidepool, source, shots)
        else:
            scale_case(tidepool, shots)
    except Failure as failure:
        print(f"FAIL: {failure}", file=sys.stderr)
        return 1
    print(f"ok: {case} in {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

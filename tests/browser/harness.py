"""What the dashboard's browser tests share: a real `tidepool server` on 127.0.0.1 (with agents
of fake GPUs when asked), a JSON client of its API, and headless Chromium driven by Selenium.

Every process started here is stopped by its PID when the test ends; nothing listens on another
address than 127.0.0.1.
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service


class Failure(Exception):
    """A check of the test failed."""


def check(condition, message):
    if not condition:
        raise Failure(message)


def wait_until(what, predicate, timeout=20.0, interval=0.05):
    """Polls `predicate` until it returns a true value, which is returned; fails after `timeout`."""
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as error:  # a page still rendering, a request refused: try again
            last_error = error
        time.sleep(interval)
    raise Failure(f"not within {timeout:.0f}s: {what}" + (f" ({last_error})" if last_error else ""))


class Api:
    """The server's REST API with one token."""

    def __init__(self, base, token):
        self.base = base
        self.token = token

    def call(self, method, path, body=None, expect=(200, 201)):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Authorization", "Bearer " + self.token)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, text = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read()
        check(status in expect, f"{method} {path}: {status} {text[:500]!r}")
        return json.loads(text) if text else None

    def get(self, path, expect=(200,)):
        return self.call("GET", path, expect=expect)

    def post(self, path, body, expect=(200, 201)):
        return self.call("POST", path, body, expect)

    def token_for(self, role, scope=""):
        body = {"role": role}
        if role == "user":
            body["tenant"] = scope
        if role == "agent":
            body["node"] = scope
        return self.post("/v1/tokens", body)["secret"]


class Pool:
    """A server (and its agents) in a scratch folder, stopped and removed by close()."""

    def __init__(self, tidepool, config_lines):
        self.tidepool = tidepool
        self.work = tempfile.mkdtemp(prefix="tidepool-browser-test.")
        # The agents run tasks as uids of their own when root: they must get through.
        os.chmod(self.work, 0o711)
        self.processes = []
        config = os.path.join(self.work, "server.yaml")
        with open(config, "w", encoding="utf-8") as out:
            out.write(f"database: {self.work}/tidepool.db\n")
            out.write("\n".join(config_lines) + "\n")
        port_file = os.path.join(self.work, "port")
        self.server = self._start(
            [tidepool, "server", "--config", config, "--listen", "127.0.0.1:0", "--port-file",
             port_file], "server.log")
        port = wait_until("the server writes its port", lambda: self._read_port(port_file), 60)
        self.base = f"http://127.0.0.1:{port}"
        with open(os.path.join(self.work, "tidepool.db.admin-token"), encoding="utf-8") as f:
            self.admin = Api(self.base, f.read().strip())
        wait_until("the server is ready", lambda: self._ready(), 60)

    def _start(self, argv, log_name, env=None):
        log = open(os.path.join(self.work, log_name), "wb")
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()
        self.processes.append(process)
        return process

    def _read_port(self, path):
        if self.server.poll() is not None:
            raise Failure("the server exited: " + self.log("server.log"))
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read().strip()
        except FileNotFoundError:
            return None
        return int(text) if text.isdigit() else None

    def _ready(self):
        try:
            with urllib.request.urlopen(self.base + "/readyz", timeout=5) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def log(self, name):
        try:
            with open(os.path.join(self.work, name), encoding="utf-8", errors="replace") as f:
                return f.read()[-4000:]
        except FileNotFoundError:
            return "(no log)"

    def start_agent(self, node, gpus="fake:8xH100"):
        token_file = os.path.join(self.work, node + ".token")
        secret = self.admin.token_for("agent", node)
        with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w",
                  encoding="utf-8") as out:
            out.write(secret)
        env = dict(os.environ)
        # The tasks may run `tidepool`: the binary under test.
        env["PATH"] = os.path.dirname(os.path.abspath(self.tidepool)) + ":" + env.get("PATH", "")
        self._start(
            [self.tidepool, "agent", "--server", self.base, "--node", node, "--gpus", gpus,
             "--token-file", token_file, "--state-dir", os.path.join(self.work, "agents", node),
             "--checkpoint-root", os.path.join(self.work, "checkpoints"),
             "--heartbeat-interval", "500ms"], f"agent-{node}.log", env)

    def close(self, keep_logs_on_failure=False):
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if not keep_logs_on_failure:
            shutil.rmtree(self.work, ignore_errors=True)


def chromium(width=1440, height=900):
    """Headless Chromium through Debian's chromedriver."""
    options = webdriver.ChromeOptions()
    for path in ("/usr/bin/chromium", "/usr/lib/chromium/chromium"):
        if os.path.exists(path):
            options.binary_location = path
            break
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--disable-extensions", "--no-first-run", f"--window-size={width},{height}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    return driver


def console_errors(driver):
    """The page's console errors (a content policy violation, an exception) since the last call."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]

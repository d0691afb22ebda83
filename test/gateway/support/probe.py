"""What an env sees of the network, for the gateway's network tests: run inside a container on an
episode network, it tries each target of the JSON list in argv[1] (all at once, each bounded) and
prints one JSON object of outcomes: "http <status>" when something answered HTTP, else why not
(refused, reset, closed, unreachable, timeout). Also: the routes, whether a raw socket can be
opened, whether the engine's socket is there, and the shipped harness run against the gateway.
"""
import http.client
import json
import os
import socket
import subprocess
import sys
import threading

TIMEOUT_S = 3.0


def http_try(target):
    conn = http.client.HTTPConnection(target["host"], target["port"], timeout=TIMEOUT_S)
    try:
        body = json.dumps(target["body"]) if "body" in target else None
        headers = dict(target.get("headers") or {})
        if body is not None:
            headers["content-type"] = "application/json"
        conn.request(target.get("method", "GET"), target.get("path", "/"), body=body, headers=headers)
        r = conn.getresponse()
        text = r.read(4096).decode("utf-8", "replace")
        return {"outcome": f"http {r.status}", "body": text}
    except ConnectionRefusedError:
        return {"outcome": "refused"}
    except ConnectionResetError:
        return {"outcome": "reset"}
    except http.client.RemoteDisconnected:
        return {"outcome": "closed"}
    except socket.timeout:
        return {"outcome": "timeout"}
    except OSError as err:
        return {"outcome": "unreachable", "detail": f"{type(err).__name__}: {err}"}
    finally:
        conn.close()


def raw_socket():
    try:
        socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP).close()
        return "opened"
    except PermissionError:
        return "denied"
    except OSError as err:
        return f"error: {err}"


def harness():
    p = subprocess.run(
        [sys.executable, "/harness/openenv_harness.py", "--instruction", "say pong", "--workdir", "/tmp"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return {"code": p.returncode, "stdout": p.stdout.strip(), "stderr": p.stderr[-2000:]}


def main():
    targets = json.loads(sys.argv[1])
    results = {}

    def run(t):
        results[t["name"]] = http_try(t)

    threads = [threading.Thread(target=run, args=(t,)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open("/proc/net/route") as f:
        routes = [line.split()[1] for line in f.read().splitlines()[1:] if line.strip()]
    out = {
        "targets": results,
        "default_route": "00000000" in routes,
        "raw_socket": raw_socket(),
        "engine_socket": os.path.exists("/var/run/docker.sock"),
        "harness": harness() if os.path.exists("/harness/openenv_harness.py") else None,
    }
    print(json.dumps(out))


main()

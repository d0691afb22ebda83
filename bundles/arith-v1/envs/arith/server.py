"""arith-v1's env: integer arithmetic, one episode per container, Python's standard library only.

Made with `openenv-bundle init arith-v1 --env python`, then given its own tools and score.

The server calls, in order: GET /health (until 200), POST /reset once, POST /tools/call per tool
call, POST /finish at most once (after the last turn). Change TOOLS and scores() for your tasks.
"""
import hashlib
import hmac
import json
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(os.environ.get("PORT", "8000"))
# Env identity: the server proves each request with this secret and expects a proof back, so an
# answer from another episode's env is never taken for this one's. Keep this part as it is.
SECRET = os.environ.pop("OPENENV_ENV_SECRET", "") or None

# this episode: set by /reset
episode = None  # {"data", "seed", "submitted", "calculations"}


class InvalidArgs(Exception):
    """A tool's own error (bad arguments): the server passes it to the model as invalid_args."""


def normalise(s):
    return str(s).strip().lower()


def scores():
    """correct: the share of the task's answers submitted right, in [0, 1] (bundle.json declares it)."""
    expected = episode["data"]["answers"]
    right = sum(1 for i, a in enumerate(episode["submitted"]) if i < len(expected) and a == expected[i])
    return {"correct": round(right / len(expected), 6)}


def integer(args, key):
    value = args.get(key)
    # JSON numbers like 3.0 count as integers; booleans do not
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise InvalidArgs('"%s" must be an integer, got %s' % (key, json.dumps(value)))
    return int(value)


OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def calculate(args):
    extra = [k for k in args if k not in ("a", "op", "b")]
    if extra:
        raise InvalidArgs("unknown argument(s) %s; calculate takes {a, op, b}" % ", ".join(extra))
    a, b = integer(args, "a"), integer(args, "b")
    op = args.get("op")
    if op not in OPS:
        raise InvalidArgs('"op" must be one of + - *, got %s' % json.dumps(op))
    episode["calculations"] += 1
    result = OPS[op](a, b)
    return {"text": "%d %s %d = %d" % (a, op, b, result), "result": {"value": result}}


def submit(args):
    extra = [k for k in args if k != "answer"]
    if extra:
        raise InvalidArgs("unknown argument(s) %s; submit takes {answer}" % ", ".join(extra))
    answer = integer(args, "answer")
    expected = episode["data"]["answers"]
    if len(episode["submitted"]) >= len(expected):
        return {"text": "Every answer of this task is already in.", "is_error": True}
    episode["submitted"].append(answer)
    if len(episode["submitted"]) == len(expected):
        return {"text": "Answer %d recorded: that was the last one." % answer, "done": True, "scores": scores()}
    return {"text": "Answer %d recorded. End your turn for the next question." % answer}


# The tools: name -> function(arguments) -> the reply (bundle.json's toolset "arith" declares them).
TOOLS = {"calculate": calculate, "submit": submit}


def sign(direction, nonce):
    return hmac.new(SECRET.encode(), ("%s:%s" % (direction, nonce)).encode(), hashlib.sha256).hexdigest()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stdout.write("%s %s\n" % (self.address_string(), fmt % args))

    def send(self, status, body):
        text = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(text)))
        if getattr(self, "proof", None):
            self.send_header("x-openenv-proof", self.proof)
        self.end_headers()
        self.wfile.write(text)

    def read_json(self):
        length = int(self.headers.get("content-length") or 0)
        text = self.rfile.read(length).decode() if length else ""
        if not text.strip():
            return {}
        try:
            return json.loads(text)
        except ValueError:
            raise InvalidArgs("the body is not JSON")

    def identity(self):
        """None (a person calling by hand), False (meant for another env), else the proven nonce."""
        nonce = self.headers.get("x-openenv-nonce")
        auth = self.headers.get("x-openenv-auth")
        if nonce is None and auth is None:
            return None
        if not nonce or not auth:
            return False
        return nonce if hmac.compare_digest(auth.lower(), sign("request", nonce)) else False

    def handle_one(self):
        global episode
        self.proof = None
        if SECRET:
            nonce = self.identity()
            if nonce is False:
                return self.send(421, {"error": "misdirected", "message": "this request was meant for another env"})
            if nonce:
                self.proof = sign("response", nonce)
        key = "%s %s" % (self.command, self.path.split("?")[0])
        if key == "GET /health":
            return self.send(200, {"status": "healthy"})
        if key == "POST /reset":
            body = self.read_json()
            data = body.get("data") if isinstance(body, dict) else None
            answers = data.get("answers") if isinstance(data, dict) else None
            if not isinstance(answers, list) or not answers or not all(isinstance(a, int) for a in answers):
                return self.send(400, {"error": "invalid_data", "message": "data.answers must be a non-empty list of integers"})
            # the seed changes nothing: a task is its data (bundle.json says "ignores_seed")
            episode = {"data": data, "seed": body.get("seed"), "submitted": [], "calculations": 0}
            return self.send(200, {})
        if key == "POST /tools/call":
            if episode is None:
                return self.send(409, {"error": "no_episode", "message": "POST /reset first"})
            body = self.read_json()
            tool = TOOLS.get(body.get("name")) if isinstance(body, dict) else None
            if tool is None:
                return self.send(404, {"error": "tool_not_found", "message": "the tools are %s" % ", ".join(TOOLS)})
            args = body.get("arguments") or {}
            try:
                return self.send(200, tool(args))
            except InvalidArgs as e:
                return self.send(400, {"error": "invalid_args", "message": str(e)})
        if key == "POST /finish":
            self.read_json()
            if episode is None:
                return self.send(409, {"error": "no_episode", "message": "POST /reset first"})
            return self.send(200, {"scores": scores()})
        return self.send(404, {"error": "not_found", "message": "no route %s" % key})

    def dispatch(self):
        try:
            self.handle_one()
        except InvalidArgs as e:
            self.send(400, {"error": "invalid_args", "message": str(e)})
        except Exception as e:  # an env bug: answer 500 with what happened, keep serving
            self.send(500, {"error": "internal", "message": repr(e)})

    do_GET = dispatch
    do_POST = dispatch


# PID 1 in a container gets no default signal handling: exit on stop.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

if __name__ == "__main__":
    print("env listening on %d" % PORT, flush=True)
    # threads: a kept-alive connection (the readiness probe's, say) never blocks the next request;
    # the server sends one request at a time, so the episode needs no lock
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer(("0.0.0.0", PORT), Handler).serve_forever()

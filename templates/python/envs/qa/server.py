"""The env of this bundle: one episode per container, Python's standard library only.

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
episode = None  # {"data", "seed", "hints", "answer"}


class InvalidArgs(Exception):
    """A tool's own error (bad arguments): the server passes it to the model as invalid_args."""


def normalise(s):
    return str(s).strip().lower()


def scores():
    """The episode's scores: bundle.json declares each (its min, max and floor)."""
    answer = episode["answer"]
    correct = 1 if answer is not None and normalise(answer) == normalise(episode["data"]["answer"]) else 0
    return {"correct": correct}


def get_hint(args):
    if args:
        raise InvalidArgs("get_hint takes no arguments")
    episode["hints"] += 1
    return {"text": str(episode["data"].get("hint", "No hint for this one."))}


def submit_answer(args):
    extra = [k for k in args if k != "answer"]
    if extra:
        raise InvalidArgs("unknown argument(s) %s; submit_answer takes {\"answer\": string}" % ", ".join(extra))
    if not isinstance(args.get("answer"), str):
        raise InvalidArgs('"answer" must be a string')
    episode["answer"] = args["answer"]
    return {"text": 'Submitted "%s".' % args["answer"], "done": True, "scores": scores()}


# The tools: name -> function(arguments) -> the reply. Change these, and bundle.json's toolsets to match.
TOOLS = {"get_hint": get_hint, "submit_answer": submit_answer}


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
            if not isinstance(data, dict) or not isinstance(data.get("answer"), str):
                return self.send(400, {"error": "invalid_data", "message": "data.answer must be a string"})
            # seed: use it for any randomness of yours (random.Random(seed)), so that the same task
            # and seed replay alike
            episode = {"data": data, "seed": body.get("seed"), "hints": 0, "answer": None}
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

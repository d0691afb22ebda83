#!/usr/bin/env python3
"""The OpenEnv harness: a small agent loop that lives in the env.

It asks the model for the next step through the OpenAI chat-completions API the env's model
gateway serves (OPENAI_BASE_URL, OPENAI_API_KEY), runs the `bash` tool calls the model returns in
this container, hands their output back, and stops when the model answers without a tool call.
Python's standard library only: copy this one file into any image with python3.

    python3 openenv_harness.py --instruction "Create /app/hello.txt saying hi"

Exit status: 0 the model stopped on its own; 2 it was still calling tools after --max-turns;
3 a model call failed (the gateway refused it: a budget spent, the upstream failed; or no
answer); 4 bad usage (no instruction, no OPENAI_BASE_URL). Each step is logged to stderr as a
JSON line; the model's last answer goes to stdout.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

SYSTEM_PROMPT = (
    "You are an agent working in a Linux container. Run shell commands with the bash tool; "
    "each call returns the command's exit code and output. Work step by step. When the task is "
    "done, reply with a short summary and no tool call."
)

BASH_TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a command with bash in the container and return its exit code and output (stdout and stderr).",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "the command line to run"}},
            "required": ["command"],
        },
    },
}

EXIT_STOPPED, EXIT_MAX_TURNS, EXIT_MODEL_FAILED, EXIT_USAGE = 0, 2, 3, 4


class ModelCallFailed(Exception):
    pass


def log(event, **fields):
    sys.stderr.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stderr.flush()


def truncate(text, limit):
    """the head and the tail of a long output, saying how much was left out"""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters left out ...]\n{text[-half:]}"


def run_bash(command, timeout_s, workdir, output_limit):
    shell = shutil.which("bash") or shutil.which("sh")
    if shell is None:
        return "this env has no shell (neither bash nor sh is installed)", None
    try:
        proc = subprocess.Popen(
            [shell, "-c", command],
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as err:
        return f"could not run the command: {err}", None
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        # the whole process group: a command's own children die with it
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, _ = proc.communicate()
        text = out.decode("utf-8", "replace")
        return truncate(f"timed out after {timeout_s} s; output so far:\n{text}", output_limit), None
    text = out.decode("utf-8", "replace")
    return truncate(f"exit code: {proc.returncode}\n{text}", output_limit), proc.returncode


class Model:
    def __init__(self, base_url, api_key, model, stream, timeout_s):
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.model = model
        self.stream = stream
        self.timeout_s = timeout_s

    def _request(self, path, body=None):
        headers = {"authorization": f"Bearer {self.api_key}"}
        data = None
        if body is not None:
            headers["content-type"] = "application/json"
            data = json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + path, data=data, headers=headers, method="POST" if body is not None else "GET")
        try:
            return urllib.request.urlopen(req, timeout=self.timeout_s)
        except urllib.error.HTTPError as err:
            detail = err.read().decode("utf-8", "replace")[:2000]
            try:
                detail = json.loads(detail)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                pass
            raise ModelCallFailed(f"the model call failed with {err.code}: {detail}") from None
        except (urllib.error.URLError, OSError) as err:
            raise ModelCallFailed(f"the model could not be reached at {self.base_url}: {err}") from None

    def default_model(self):
        with self._request("/models") as r:
            listed = json.load(r).get("data") or []
        return listed[0]["id"] if listed else "default"

    def ask(self, messages):
        body = {"model": self.model, "messages": messages, "tools": [BASH_TOOL]}
        if not self.stream:
            with self._request("/chat/completions", body) as r:
                reply = json.load(r)
            choices = reply.get("choices") or []
            if not choices:
                raise ModelCallFailed(f"the model's reply has no choices: {json.dumps(reply)[:500]}")
            return choices[0].get("message") or {}
        body["stream"] = True
        return self._ask_streamed(body)

    def _ask_streamed(self, body):
        content, calls = [], {}
        with self._request("/chat/completions", body) as r:
            for raw in r:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    chunk = json.loads(data)
                except ValueError:
                    raise ModelCallFailed(f"the model's stream sent an event that is not JSON: {data[:200]}") from None
                if chunk.get("error"):
                    raise ModelCallFailed(f"the model's stream failed: {chunk['error'].get('message', chunk['error'])}")
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    if delta.get("content"):
                        content.append(delta["content"])
                    for t in delta.get("tool_calls") or []:
                        call = calls.setdefault(t.get("index", 0), {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
                        call["id"] = t.get("id") or call["id"]
                        fn = t.get("function") or {}
                        call["function"]["name"] += fn.get("name") or ""
                        call["function"]["arguments"] += fn.get("arguments") or ""
        message = {"role": "assistant", "content": "".join(content) or None}
        if calls:
            message["tool_calls"] = [calls[i] for i in sorted(calls)]
        return message


def tool_result(call, args):
    """the text the model gets back for one tool call"""
    fn = call.get("function") or {}
    if fn.get("name") != "bash":
        return f"unknown tool {fn.get('name')!r}: the only tool is bash", None
    try:
        parsed = json.loads(fn.get("arguments") or "{}")
    except ValueError as err:
        return f"the arguments are not JSON ({err}); call bash with {{\"command\": \"...\"}}", None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("command"), str):
        return 'the arguments must be an object with a string "command"', None
    return run_bash(parsed["command"], args.tool_timeout, args.workdir, args.output_limit)


def instruction_of(args):
    if args.instruction is not None:
        return args.instruction
    if args.instruction_file is not None:
        with open(args.instruction_file, encoding="utf-8") as f:
            return f.read()
    if os.environ.get("OPENENV_INSTRUCTION_FILE"):
        with open(os.environ["OPENENV_INSTRUCTION_FILE"], encoding="utf-8") as f:
            return f.read()
    if os.environ.get("OPENENV_INSTRUCTION"):
        return os.environ["OPENENV_INSTRUCTION"]
    if not sys.stdin.isatty():
        return sys.stdin.read()
    return None


def main(argv=None):
    p = argparse.ArgumentParser(description="Run a task with a model through the env's model gateway (OPENAI_BASE_URL, OPENAI_API_KEY).")
    p.add_argument("--instruction", help="the task (else --instruction-file, OPENENV_INSTRUCTION_FILE, OPENENV_INSTRUCTION, or stdin)")
    p.add_argument("--instruction-file")
    p.add_argument("--model", default=os.environ.get("OPENENV_MODEL"), help="the model to name (default: OPENENV_MODEL, else the first of GET /models)")
    p.add_argument("--max-turns", type=int, default=int(os.environ.get("OPENENV_MAX_TURNS", "50")))
    p.add_argument("--tool-timeout", type=float, default=60.0, help="seconds one command may run")
    p.add_argument("--model-timeout", type=float, default=600.0, help="seconds one model call may take")
    p.add_argument("--output-limit", type=int, default=16384, help="characters of a command's output the model sees")
    p.add_argument("--workdir", default=os.getcwd())
    p.add_argument("--stream", action="store_true", help="ask for streamed replies")
    args = p.parse_args(argv)

    base_url = os.environ.get("OPENAI_BASE_URL")
    if not base_url:
        log("usage_error", message="OPENAI_BASE_URL is not set")
        return EXIT_USAGE
    instruction = instruction_of(args)
    if not instruction or not instruction.strip():
        log("usage_error", message="no instruction: give --instruction, --instruction-file, OPENENV_INSTRUCTION_FILE, OPENENV_INSTRUCTION or stdin")
        return EXIT_USAGE

    model = Model(base_url, os.environ.get("OPENAI_API_KEY", ""), args.model, args.stream, args.model_timeout)
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": instruction}]
    try:
        if model.model is None:
            model.model = model.default_model()
        for turn in range(1, args.max_turns + 1):
            started = time.monotonic()
            message = model.ask(messages)
            calls = message.get("tool_calls") or []
            messages.append({"role": "assistant", "content": message.get("content"), **({"tool_calls": calls} if calls else {})})
            log("model", turn=turn, tool_calls=len(calls), seconds=round(time.monotonic() - started, 3))
            if not calls:
                sys.stdout.write((message.get("content") or "") + "\n")
                log("stopped", turns=turn)
                return EXIT_STOPPED
            for call in calls:
                result, code = tool_result(call, args)
                log("tool", turn=turn, name=(call.get("function") or {}).get("name"), exit_code=code)
                messages.append({"role": "tool", "tool_call_id": call.get("id") or "", "content": result})
    except ModelCallFailed as err:
        log("model_failed", message=str(err))
        return EXIT_MODEL_FAILED
    log("max_turns", turns=args.max_turns)
    return EXIT_MAX_TURNS


if __name__ == "__main__":
    sys.exit(main())

"""Calling a codexpool worker pool from Python with plain NATS request-reply (nats-py).

    pip install nats-py            # see requirements.txt
    python codexpool_client.py "Say hello"
    python codexpool_client.py --stream "Write a haiku about queues"

NATS: CODEXPOOL_NATS_URL (default nats://127.0.0.1:4222), CODEXPOOL_NATS_CREDS,
CODEXPOOL_NATS_USER / CODEXPOOL_NATS_PASSWORD, CODEXPOOL_NATS_TOKEN, CODEXPOOL_NATS_TLS_CA,
CODEXPOOL_NATS_TLS_CERT / CODEXPOOL_NATS_TLS_KEY — the same settings a worker reads.
"""

import asyncio
import json
import os
import re
import ssl
import sys

import nats
from nats.errors import NoRespondersError

SUBJECT = os.environ.get("CODEXPOOL_SUBJECT", "codex.generate")


class CodexpoolError(Exception):
    """An error reply: the Nats-Service-Error-Code header and the JSON body
    {"error": {"code", "message", "status", "retry_after_ms"?}}."""

    def __init__(self, status, code, message, retry_after_ms=None):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.retry_after_ms = status, code, message, retry_after_ms


def error_of(msg):
    """Returns a CodexpoolError when msg is an error reply, else None."""
    status = (msg.headers or {}).get("Nats-Service-Error-Code")
    if not status:
        return None
    try:
        e = json.loads(msg.data)["error"]
        return CodexpoolError(e.get("status", int(status)), e["code"], e.get("message", ""), e.get("retry_after_ms"))
    except (ValueError, KeyError, TypeError):
        return CodexpoolError(int(status), "unknown", msg.headers.get("Nats-Service-Error", ""))


def local_auth(servers):
    """The credential of a local embedded server (`codexpool worker` with no NATS URL): user
    "codexpool" and the password in $XDG_STATE_HOME/codexpool/nats-password (~/.local/state/...),
    offered only to servers on this machine's loopback."""
    if not all(re.fullmatch(r"(nats://)?(127\.[0-9.]+|localhost|\[::1\])(:[0-9]+)?", s.strip()) for s in servers):
        return {}
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    try:
        with open(os.path.join(state, "codexpool", "nats-password")) as f:
            return {"user": "codexpool", "password": f.read().strip()}
    except OSError:
        return {}


async def connect_from_env():
    env = os.environ
    opts = {"servers": env.get("CODEXPOOL_NATS_URL", "nats://127.0.0.1:4222").split(","), "name": "codexpool python example"}
    if env.get("CODEXPOOL_NATS_CREDS"):
        opts["user_credentials"] = env["CODEXPOOL_NATS_CREDS"]
    if env.get("CODEXPOOL_NATS_USER"):
        opts["user"], opts["password"] = env["CODEXPOOL_NATS_USER"], env.get("CODEXPOOL_NATS_PASSWORD", "")
    if env.get("CODEXPOOL_NATS_TOKEN"):
        opts["token"] = env["CODEXPOOL_NATS_TOKEN"]
    if not any(k in opts for k in ("user_credentials", "user", "token")):
        opts.update(local_auth(opts["servers"]))
    if env.get("CODEXPOOL_NATS_TLS_CA") or env.get("CODEXPOOL_NATS_TLS_CERT"):
        ctx = ssl.create_default_context(cafile=env.get("CODEXPOOL_NATS_TLS_CA"))
        if env.get("CODEXPOOL_NATS_TLS_CERT"):
            ctx.load_cert_chain(env["CODEXPOOL_NATS_TLS_CERT"], env.get("CODEXPOOL_NATS_TLS_KEY"))
        opts["tls"] = ctx
    return await nats.connect(**opts)


def _headers(timeout):
    return {"Codex-Timeout": f"{int(timeout)}s"}  # the worker gives up when we do


async def generate(nc, body, timeout=120):
    """One-shot request; returns the response object (its output_text is the answer)."""
    try:
        msg = await nc.request(SUBJECT, json.dumps({**body, "stream": False}).encode(), timeout=timeout, headers=_headers(timeout))
    except NoRespondersError:
        raise RuntimeError(f"no codexpool worker is serving {SUBJECT}") from None
    err = error_of(msg)
    if err:
        raise err
    return json.loads(msg.data)


async def stream(nc, body, on_event, timeout=120):
    """Streaming request: calls on_event(event) for every upstream event, in order, until the
    empty sentinel message; returns the response object of response.completed. nats-py has no
    "request many", so this subscribes to an inbox and publishes with it as the reply subject."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    try:
        await nc.publish(SUBJECT, json.dumps({**body, "stream": True}).encode(), reply=inbox, headers=_headers(timeout))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        response, error = None, None
        while True:
            msg = await sub.next_msg(timeout=max(deadline - loop.time(), 0.001))  # raises TimeoutError
            if not msg.data:
                if (msg.headers or {}).get("Status") == "503":
                    raise RuntimeError(f"no codexpool worker is serving {SUBJECT}")
                if error:  # an error message comes just before the sentinel
                    raise error
                return response
            error = error_of(msg)
            if error:
                continue
            event = json.loads(msg.data)
            if event.get("type") == "response.completed":
                response = event["response"]
            on_event(event)
    finally:
        await sub.unsubscribe()


def output_text(response):
    if isinstance(response.get("output_text"), str):
        return response["output_text"]
    return "".join(
        part.get("text", "")
        for item in response.get("output", []) if item.get("type") == "message"
        for part in item.get("content", []) if part.get("type") == "output_text"
    )


async def main(argv):
    streaming = argv[:1] == ["--stream"]
    prompt = " ".join(argv[1:] if streaming else argv)
    if not prompt:
        print('usage: codexpool_client.py [--stream] "PROMPT"', file=sys.stderr)
        return 2
    nc = await connect_from_env()
    try:
        if streaming:
            def show(ev):
                if ev.get("type") == "response.output_text.delta":
                    print(ev["delta"], end="", flush=True)
            await stream(nc, {"input": prompt}, show)
            print()
        else:
            print(output_text(await generate(nc, {"input": prompt})))
        return 0
    except CodexpoolError as e:
        retry = f" (retry after {e.retry_after_ms} ms)" if e.retry_after_ms else ""
        print(f"codexpool: {e.status} {e.code}: {e.message}{retry}", file=sys.stderr)
        return 1
    except (RuntimeError, asyncio.TimeoutError, nats.errors.TimeoutError) as e:
        print(f"codexpool: {e or type(e).__name__}", file=sys.stderr)
        return 1
    finally:
        await nc.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))

"""Durable jobs from Python (nats-py): publish a request to codex.jobs.submit with a JetStream
publish (the PubAck means it is stored; Nats-Msg-Id makes resubmitting it harmless), then watch
its key in the results bucket.

    pip install nats-py            # see requirements.txt
    python jobs.py my-job-1 "Say hello"

NATS settings as in codexpool_client.py; CODEXPOOL_JOBS_SUBJECT (codex.jobs) and
CODEXPOOL_RESULTS_BUCKET (CODEXPOOL_RESULTS) as a worker reads them.
"""

import asyncio
import json
import os
import sys

from codexpool_client import CodexpoolError, connect_from_env, output_text

JOBS_SUBJECT = os.environ.get("CODEXPOOL_JOBS_SUBJECT", "codex.jobs") + ".submit"
RESULTS_BUCKET = os.environ.get("CODEXPOOL_RESULTS_BUCKET", "CODEXPOOL_RESULTS")


async def submit_job(nc, job_id, body, reply_to=None):
    """Stores body (a Responses API create body) as job job_id; returns the PubAck
    (ack.duplicate is True when the stream already had that id)."""
    headers = {"Nats-Msg-Id": job_id}
    if reply_to:
        headers["Codex-Reply-To"] = reply_to
    return await nc.jetstream().publish(JOBS_SUBJECT, json.dumps(body).encode(), headers=headers)


def result_of(value):
    """The response object of a stored result, or a raised CodexpoolError for an error body."""
    v = json.loads(value)
    if list(v) == ["error"] and v["error"]:
        e = v["error"]
        raise CodexpoolError(e.get("status"), e.get("code"), e.get("message", ""), e.get("retry_after_ms"))
    return v


async def wait_job(nc, job_id, timeout=600):
    """Returns the job's result as soon as it is stored (raises CodexpoolError for a failed job,
    asyncio.TimeoutError after timeout seconds)."""
    kv = await nc.jetstream().key_value(RESULTS_BUCKET)
    watcher = await kv.watch(job_id)
    try:
        async def first_put():
            async for entry in watcher:
                if entry is not None and entry.operation is None and entry.value:
                    return result_of(entry.value)
        return await asyncio.wait_for(first_put(), timeout)
    finally:
        await watcher.stop()


async def main(argv):
    if len(argv) < 3:
        print("usage: python jobs.py JOB_ID PROMPT", file=sys.stderr)
        return 2
    nc = await connect_from_env()
    try:
        ack = await submit_job(nc, argv[1], {"input": " ".join(argv[2:])})
        print(f"stored as {argv[1]} (stream sequence {ack.seq}, duplicate {ack.duplicate})", file=sys.stderr)
        print(output_text(await wait_job(nc, argv[1])))
        return 0
    except CodexpoolError as e:
        print(f"job failed: {e}", file=sys.stderr)
        return 1
    finally:
        await nc.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv)))

// Ask the pool from the command line:
//   node ask.mjs "Say hello"
//   node ask.mjs --stream "Write a haiku about queues"
// NATS: CODEXPOOL_NATS_URL (default nats://127.0.0.1:4222) and the CODEXPOOL_NATS_* auth settings.
import { CodexpoolError, connectFromEnv, generate, outputText, stream } from "./codexpool.mjs";

const args = process.argv.slice(2);
const streaming = args[0] === "--stream";
const prompt = (streaming ? args.slice(1) : args).join(" ");
if (!prompt) {
  console.error('usage: node ask.mjs [--stream] "PROMPT"');
  process.exit(2);
}

const nc = await connectFromEnv();
try {
  if (streaming) {
    await stream(nc, { input: prompt }, (ev) => {
      if (ev.type === "response.output_text.delta") process.stdout.write(ev.delta);
    });
    process.stdout.write("\n");
  } else {
    console.log(outputText(await generate(nc, { input: prompt })));
  }
} catch (err) {
  if (err instanceof CodexpoolError) {
    const retry = err.retryAfterMs ? ` (retry after ${err.retryAfterMs} ms)` : "";
    console.error(`codexpool: ${err.status} ${err.code}: ${err.message.replace(/^\d+ \S+: /, "")}${retry}`);
  } else {
    console.error(`codexpool: ${err.message}`);
  }
  process.exitCode = 1;
} finally {
  await nc.close();
}

// `arena serve` in a child process for the Node.js tests, as tests/client_js/test_node.py sets it
// up: $ARENA_CONFIG (a config.toml of boards "score" and "points"), $ARENA_TOKEN (a game server's
// token), $ARENA_PYTHON (the interpreter that runs the server). Every wait has a deadline.
import { spawn } from "node:child_process";
import { openSync, closeSync } from "node:fs";
import { dirname, join } from "node:path";
import { freePort, until } from "./wait.mjs";

export { freePort, until };

export const CONFIG = need("ARENA_CONFIG");
export const TOKEN = need("ARENA_TOKEN");
const PYTHON = process.env.ARENA_PYTHON ?? "python3";

function need(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(`$${name} is not set: run these tests through pytest (tests/client_js/test_node.py), `
      + "which writes the server's config and sets $ARENA_CONFIG, $ARENA_TOKEN and $ARENA_PYTHON");
  }
  return value;
}

async function ready(url) {
  try {
    return (await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2000) })).status === 200;
  } catch {
    return false;
  }
}

/** `arena serve` on `port` (default: a free one); resolves once /readyz answers 200. */
export async function startServer(port) {
  port ??= await freePort();
  const log = openSync(join(dirname(CONFIG), `serve-${port}.log`), "a");
  const child = spawn(PYTHON, ["-m", "arena", "serve", "--config", CONFIG, "--port", String(port)],
    { stdio: ["ignore", log, log] });
  closeSync(log);
  const server = {
    port,
    url: `http://127.0.0.1:${port}`,
    child,
    exited: new Promise((resolve) => child.once("exit", resolve)),
    /** SIGKILL, and wait for the exit. */
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await server.exited;
    },
  };
  let gone = false;
  server.exited.then(() => { gone = true; });
  await until(async () => {
    if (gone) throw new Error(`arena serve exited before it was ready; see serve-${port}.log beside ${CONFIG}`);
    return ready(server.url);
  }, `arena serve on port ${port} to be ready`, 60000);
  return server;
}

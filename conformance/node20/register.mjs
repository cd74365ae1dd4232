// Preloaded (`node --import`) when the MCP conformance suite runs on Node.js 20: the suite's
// bundle imports `globSync` from "fs", which Node.js has only since 22. Hooks only then.
import fs from 'node:fs';
import { register } from 'node:module';

if (typeof fs.globSync !== 'function') {
  register('./hooks.mjs', import.meta.url);
}

// node:fs with the one globSync the conformance suite calls (`tier-check`: "**/checks.json"
// under a results folder); any other pattern is refused rather than answered wrongly.
import fs from 'node:fs';
import path from 'node:path';

export * from 'node:fs';
export default fs;

export function globSync(pattern, options = {}) {
  const match = /^\*\*\/([^*?[\]{}/]+)$/.exec(pattern);
  if (match === null) {
    throw new Error(`fs.globSync on Node.js ${process.version} supports only "**/<name>", not ${pattern}`);
  }
  const cwd = options.cwd ?? process.cwd();
  return fs
    .readdirSync(cwd, { recursive: true })
    .filter((entry) => path.basename(entry) === match[1]);
}

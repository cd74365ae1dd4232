// Module resolution hooks (see register.mjs): the conformance suite's "fs" is fs.mjs.
const SUITE = '/node_modules/@modelcontextprotocol/conformance/';
const FS = new URL('./fs.mjs', import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL?.includes(SUITE)) {
    return { url: FS, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}

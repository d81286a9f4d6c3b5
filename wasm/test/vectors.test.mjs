// Runs every tests/vectors/*.json present through the WASM handleRequest.
import { describe, test } from 'node:test';
import { join } from 'node:path';
import { bs, ROOT } from './helpers.mjs';
import { loadVectorFiles, runCase } from './vector-runner.mjs';

const files = loadVectorFiles(join(ROOT, 'tests/vectors'));
// The vectors check the API's answers; they set webhooks to example.com,
// which nothing may actually be sent to (deliveries: webhooks.test.mjs).
const makeService = (config) => new bs.Service(config, { webhooks: false });

if (files.length === 0) {
  test('tests/vectors holds no vector files yet', { skip: 'no tests/vectors/*.json present' }, () => {});
}

for (const { file, doc, error } of files) {
  describe(`vectors ${file}`, () => {
    if (error) {
      test(`${file} is a readable vector file`, () => {
        throw error;
      });
      return;
    }
    const seen = new Set();
    doc.cases.forEach((c, i) => {
      const name = typeof c.name === 'string' ? c.name : `<unnamed case ${i}>`;
      const dup = seen.has(name);
      seen.add(name);
      test(dup ? `${name} (#${i})` : name, () => {
        if (dup) throw new Error(`duplicate case name in ${file}: ${name}`);
        runCase(c, makeService);
      });
    });
  });
}

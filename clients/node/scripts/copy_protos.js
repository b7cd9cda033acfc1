// Copies the broker's API (api/hourglass/v1/*.proto in the repository) into
// proto/hourglass/v1, where the package loads it from (src/proto.ts) and
// ships it. Run by `npm run build` and `npm pack` (prepack); the copies are
// not committed, so they are always the API of the checkout they came from.
'use strict';
const fs = require('fs');
const path = require('path');

const from = path.join(__dirname, '..', '..', '..', 'api', 'hourglass', 'v1');
const to = path.join(__dirname, '..', 'proto', 'hourglass', 'v1');
fs.mkdirSync(to, { recursive: true });
const protos = fs.readdirSync(from).filter((name) => name.endsWith('.proto'));
if (protos.length === 0) {
  console.error(`copy_protos: no .proto files in ${from}`);
  process.exit(1);
}
for (const name of protos) fs.copyFileSync(path.join(from, name), path.join(to, name));

#!/usr/bin/env bash
# Rebuilds the ABI and bytecode of the test tokens in store/testtoken from
# their Solidity sources, with the solc compiler from npm at a pinned version
# (installed into the gitignored .tools/solc on first use).
#
# The outputs (<Name>.abi.json, <Name>.bin) are committed beside the sources,
# so building and testing the Go code never needs solc; run this after
# changing a .sol file and commit the result.
#
# Usage: scripts/build-contracts.sh
set -euo pipefail
cd "$(dirname "$0")/.."

SOLC_VERSION=0.8.28    # keep in step with the pragma in the .sol files
EVM_VERSION=paris      # no PUSH0: runs on chains that lag behind Shanghai
TOOLS=.tools/solc
DIR=store/testtoken

if [ "$(cat "$TOOLS/.version" 2>/dev/null)" != "$SOLC_VERSION" ]; then
	echo "==> installing solc@$SOLC_VERSION from npm into $TOOLS"
	rm -rf "$TOOLS"
	mkdir -p "$TOOLS"
	npm install --silent --no-audit --no-fund --prefix "$TOOLS" "solc@$SOLC_VERSION"
	echo "$SOLC_VERSION" >"$TOOLS/.version"
fi

echo "==> compiling $DIR/*.sol (solc $SOLC_VERSION, evm $EVM_VERSION, optimizer 200 runs)"
NODE_PATH="$TOOLS/node_modules" EVM_VERSION="$EVM_VERSION" node - "$DIR" <<'JS'
const fs = require('fs');
const path = require('path');
const solc = require('solc');
const dir = process.argv[2];
const sources = {};
for (const f of fs.readdirSync(dir).filter((f) => f.endsWith('.sol')).sort()) {
  sources[f] = { content: fs.readFileSync(path.join(dir, f), 'utf8') };
}
const input = {
  language: 'Solidity',
  sources,
  settings: {
    optimizer: { enabled: true, runs: 200 },
    evmVersion: process.env.EVM_VERSION,
    metadata: { bytecodeHash: 'none' },
    outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
  },
};
const out = JSON.parse(solc.compile(JSON.stringify(input)));
let failed = false;
for (const e of out.errors || []) {
  console.error(e.formattedMessage);
  if (e.severity === 'error') failed = true;
}
if (failed) process.exit(1);
for (const [file, contracts] of Object.entries(out.contracts)) {
  for (const [name, c] of Object.entries(contracts)) {
    fs.writeFileSync(path.join(dir, name + '.abi.json'), JSON.stringify(c.abi, null, 2) + '\n');
    fs.writeFileSync(path.join(dir, name + '.bin'), c.evm.bytecode.object + '\n');
    console.log(`    ${file}: ${name} (${c.evm.bytecode.object.length / 2} bytes)`);
  }
}
JS

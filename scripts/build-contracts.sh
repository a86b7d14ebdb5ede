#!/usr/bin/env bash
# Rebuilds the ABI and bytecode of the test contracts from their Solidity
# sources, with the solc compiler from npm at a pinned version (installed
# into the gitignored .tools/solc on first use):
#
#   - hosts/evmpaytest/testtoken: the test ERC-20 tokens;
#   - invoice/pricing/chainlinktest: Chainlink's own MockV3Aggregator from
#     the @chainlink/contracts npm package (pinned, unpacked into the
#     gitignored .tools/chainlink) and a scripted aggregator beside it.
#
# The outputs (<Name>.abi.json, <Name>.bin) are committed beside the sources,
# so building and testing the Go code never needs solc; run this after
# changing a .sol file (or the pinned versions) and commit the result.
#
# Usage: scripts/build-contracts.sh
set -euo pipefail
cd "$(dirname "$0")/.."

SOLC_VERSION=0.8.28    # keep in step with the pragma in the .sol files
EVM_VERSION=paris      # no PUSH0: runs on chains that lag behind Shanghai
CHAINLINK_VERSION=1.5.0
TOOLS=.tools/solc
CHAINLINK=.tools/chainlink

if [ "$(cat "$TOOLS/.version" 2>/dev/null)" != "$SOLC_VERSION" ]; then
	echo "==> installing solc@$SOLC_VERSION from npm into $TOOLS"
	rm -rf "$TOOLS"
	mkdir -p "$TOOLS"
	npm install --silent --no-audit --no-fund --prefix "$TOOLS" "solc@$SOLC_VERSION"
	echo "$SOLC_VERSION" >"$TOOLS/.version"
fi

# @chainlink/contracts declares dependencies the Solidity we compile never
# imports (one of them a git URL, which an npm install would have to fetch
# from outside the registry), so the package is fetched alone with
# `npm pack` and unpacked where solc's import callback finds it.
if [ "$(cat "$CHAINLINK/.version" 2>/dev/null)" != "$CHAINLINK_VERSION" ]; then
	echo "==> fetching @chainlink/contracts@$CHAINLINK_VERSION from npm into $CHAINLINK"
	rm -rf "$CHAINLINK"
	mkdir -p "$CHAINLINK/node_modules/@chainlink"
	tgz=$(cd "$CHAINLINK" && npm pack --silent "@chainlink/contracts@$CHAINLINK_VERSION")
	tar xzf "$CHAINLINK/$tgz" -C "$CHAINLINK/node_modules/@chainlink"
	mv "$CHAINLINK/node_modules/@chainlink/package" "$CHAINLINK/node_modules/@chainlink/contracts"
	rm "$CHAINLINK/$tgz"
	echo "$CHAINLINK_VERSION" >"$CHAINLINK/.version"
fi

# compile DIR [NODE_MODULES]: compiles DIR/*.sol, resolving imports such as
# "@chainlink/contracts/…" under NODE_MODULES, and writes the ABI and
# bytecode of every deployable contract (interfaces have no bytecode) of
# every source, imported ones included, into DIR.
compile() {
	echo "==> compiling $1/*.sol (solc $SOLC_VERSION, evm $EVM_VERSION, optimizer 200 runs)"
	NODE_PATH="$TOOLS/node_modules" EVM_VERSION="$EVM_VERSION" node - "$1" "${2:-}" <<'JS'
const fs = require('fs');
const path = require('path');
const solc = require('solc');
const [dir, modules] = process.argv.slice(2);
const sources = {};
for (const f of fs.readdirSync(dir).filter((f) => f.endsWith('.sol')).sort()) {
  sources[f] = { content: fs.readFileSync(path.join(dir, f), 'utf8') };
}
const findImports = (name) => {
  const file = modules && path.join(modules, name);
  if (!file || !path.resolve(file).startsWith(path.resolve(modules) + path.sep) || !fs.existsSync(file)) {
    return { error: `import not found: ${name}` };
  }
  return { contents: fs.readFileSync(file, 'utf8') };
};
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
const out = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
let failed = false;
for (const e of out.errors || []) {
  console.error(e.formattedMessage);
  if (e.severity === 'error') failed = true;
}
if (failed) process.exit(1);
for (const [file, contracts] of Object.entries(out.contracts)) {
  for (const [name, c] of Object.entries(contracts)) {
    if (!c.evm.bytecode.object) continue; // an interface or abstract contract
    fs.writeFileSync(path.join(dir, name + '.abi.json'), JSON.stringify(c.abi, null, 2) + '\n');
    fs.writeFileSync(path.join(dir, name + '.bin'), c.evm.bytecode.object + '\n');
    console.log(`    ${file}: ${name} (${c.evm.bytecode.object.length / 2} bytes)`);
  }
}
JS
}

compile hosts/evmpaytest/testtoken
compile invoice/pricing/chainlinktest "$CHAINLINK/node_modules"

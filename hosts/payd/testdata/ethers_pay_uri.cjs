// Pays one EIP-681 payment URI with ethers.js v6 as a wallet would: fees
// from ethers' getFeeData (the node's fee market), the transfer form for
// token URIs, then waits for the receipt. Prints the transaction hash.
//
// Usage: NODE_PATH=<dir with ethers> node ethers_pay_uri.cjs RPC_URL PRIVATE_KEY URI
"use strict";
const { ethers } = require("ethers");

async function main() {
	const [url, key, uri] = process.argv.slice(2);
	const m = /^ethereum:(0x[0-9a-fA-F]{40})@(\d+)(\/transfer)?\?(.*)$/.exec(uri);
	if (!m) throw new Error(`not an EIP-681 URI this script pays: ${uri}`);
	const [, target, chainId, transfer, query] = m;
	const q = new URLSearchParams(query);
	const provider = new ethers.JsonRpcProvider(url, undefined, { staticNetwork: true });
	const net = await provider.getNetwork();
	if (net.chainId !== BigInt(chainId)) throw new Error(`the URI is for chain ${chainId}, the node is ${net.chainId}`);
	const wallet = new ethers.Wallet(key, provider);
	let tx;
	if (transfer) {
		const token = new ethers.Contract(target, ["function transfer(address to, uint256 value) returns (bool)"], wallet);
		tx = await token.transfer(q.get("address"), BigInt(q.get("uint256")));
	} else {
		tx = await wallet.sendTransaction({ to: target, value: BigInt(q.get("value")) });
	}
	const receipt = await tx.wait(1, 120000);
	if (receipt.status !== 1) throw new Error(`transaction ${tx.hash} failed`);
	console.log(tx.hash);
}

main().catch((err) => {
	console.error(err && (err.shortMessage || err.message) || err);
	process.exit(1);
});

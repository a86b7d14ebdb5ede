// Pays COUNT times in a row from a dev-mnemonic account with ethers.js v6,
// the way a wallet does: send, then look the transaction and its receipt up
// at once and every 100 ms until it is mined (viem's
// waitForTransactionReceipt), and finally tx.wait(), with ethers' defaults
// (request cache included). Any error a call
// returns is counted; the script exits 1 when there was one.
//
// Usage: NODE_PATH=<dir with ethers> node ethers_pay.cjs RPC_URL COUNT ACCOUNT_INDEX
"use strict";
const { ethers } = require("ethers");

const MNEMONIC = "test test test test test test test test test test test junk";

async function main() {
	const [url, countArg, indexArg] = process.argv.slice(2);
	const count = Number(countArg);
	const provider = new ethers.JsonRpcProvider(url, undefined, { staticNetwork: true, batchMaxCount: 1 });
	provider.pollingInterval = 100;
	// A NonceManager, as ethers documents for sending in a row: the
	// provider's 250 ms request cache would otherwise hand back the previous
	// pending nonce when a payment is mined within 250 ms of being sent.
	const wallet = new ethers.NonceManager(
		ethers.HDNodeWallet.fromPhrase(MNEMONIC, undefined, `m/44'/60'/0'/0/${indexArg}`).connect(provider));
	const to = ethers.Wallet.createRandom().address;

	const errors = [];
	const note = (what, err) => {
		errors.push(`${what}: ${err && (err.shortMessage || err.message) || err}` + (err && err.error ? " " + JSON.stringify(err.error) : ""));
	};
	let mined = 0;
	for (let i = 0; i < count; i++) {
		let tx;
		try {
			tx = await wallet.sendTransaction({ to, value: 1n + BigInt(i) });
		} catch (err) {
			note(`payment ${i}: send`, err);
			continue;
		}
		let receipt = null;
		for (let polls = 0; receipt === null && polls < 600; polls++) {
			if (polls > 0) await new Promise((r) => setTimeout(r, 100));
			try {
				await provider.getTransaction(tx.hash);
			} catch (err) {
				note(`payment ${i}: eth_getTransactionByHash`, err);
			}
			try {
				receipt = await provider.getTransactionReceipt(tx.hash);
			} catch (err) {
				note(`payment ${i}: eth_getTransactionReceipt`, err);
			}
		}
		try {
			const r = await tx.wait(1, 60000);
			if (r && r.status === 1 && receipt !== null && r.blockHash === receipt.blockHash) mined++;
			else note(`payment ${i}: tx.wait`, `receipt ${JSON.stringify(r)} does not match ${JSON.stringify(receipt)}`);
		} catch (err) {
			note(`payment ${i}: tx.wait`, err);
		}
	}
	provider.destroy();
	console.log(JSON.stringify({ mined, errors: errors.length, first_errors: errors.slice(0, 10) }));
	process.exit(errors.length === 0 && mined === count ? 0 : 1);
}

main().catch((err) => {
	console.log(JSON.stringify({ fatal: String(err && err.stack || err) }));
	process.exit(2);
});

// Package browserwallet is a browser wallet for checkout pages tested in
// a real browser: an EIP-1193 provider injected before the page's scripts
// run (chromedp's page.AddScriptToEvaluateOnNewDocument) that records
// every request the page makes of it.
package browserwallet

// Recording is the provider's script. It records every request (method
// and params) in window.__walletCalls and every CSP violation in
// window.__exceptions. It is on chain 1337 (0x539) and knows only that
// chain: switching to another answers 4902 until wallet_addEthereumChain
// added it (which also switches to it, as wallets do). It answers
// eth_requestAccounts and eth_accounts with 0x70997970C51812dc3A010C7d01b50e0d17dc79C8
// and eth_sendTransaction with a made-up hash (nothing is broadcast),
// refusing, like a wallet that checks it, a transaction whose chainId is
// not the current chain.
const Recording = `(() => {
	const calls = [];
	window.__walletCalls = calls;
	window.__exceptions = [];
	window.addEventListener("securitypolicyviolation", (e) => window.__exceptions.push("CSP " + e.violatedDirective));
	let current = "0x539";
	const known = new Set([current]);
	const fail = (code, message) => Object.assign(new Error(message), { code });
	window.ethereum = {
		on() {}, removeListener() {},
		request: async ({ method, params }) => {
			calls.push({ method, params: params === undefined ? null : JSON.parse(JSON.stringify(params)) });
			switch (method) {
			case "eth_chainId":
				return current;
			case "eth_requestAccounts":
			case "eth_accounts":
				return ["0x70997970C51812dc3A010C7d01b50e0d17dc79C8"];
			case "wallet_switchEthereumChain":
				if (!known.has(params[0].chainId)) throw fail(4902, "Unrecognized chain ID " + params[0].chainId);
				current = params[0].chainId;
				return null;
			case "wallet_addEthereumChain":
				known.add(params[0].chainId);
				current = params[0].chainId;
				return null;
			case "eth_sendTransaction":
				if (params[0].chainId !== undefined && params[0].chainId !== current) throw fail(-32602, "chainId does not match the current chain " + current);
				return "0x" + "cd".repeat(32);
			}
			throw fail(4200, "unsupported " + method);
		},
	};
})();`

// Account is the address the wallet answers with.
const Account = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"

// Call is one request the page made of the wallet (window.__walletCalls).
type Call struct {
	Method string           `json:"method"`
	Params []map[string]any `json:"params"`
}

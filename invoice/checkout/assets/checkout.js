// evmpay hosted checkout. No dependencies, no build step.
//
// The lookup token is the URL fragment (#<token>): browsers never send a
// fragment to a server, so it reaches no access log. The page polls the
// public invoice read with it as a bearer token. Amounts are BigInt base
// units throughout; text is only ever set with textContent.
"use strict";

(function () {
  const body = document.body;
  const cfg = JSON.parse(body.dataset.config);
  const M = JSON.parse(body.dataset.messages);
  const $ = (id) => document.getElementById(id);

  // t formats message key with {name} placeholders.
  function t(key, args) {
    return (M[key] || key).replace(/\{(\w+)\}/g, (m, k) => (args && k in args ? String(args[k]) : m));
  }

  // formatUnits renders base units exactly: formatUnits(500000000000000000n, 18) is "0.5".
  function formatUnits(v, decimals) {
    const neg = v < 0n;
    if (neg) v = -v;
    const base = 10n ** BigInt(decimals);
    const whole = (v / base).toString();
    let frac = decimals > 0 ? (v % base).toString().padStart(decimals, "0").replace(/0+$/, "") : "";
    return (neg ? "-" : "") + whole + (frac ? "." + frac : "");
  }

  function big(s) {
    return typeof s === "string" && /^[0-9]+$/.test(s) ? BigInt(s) : 0n;
  }

  // asset describes what the invoice is paid in: a token when the API names
  // one (asset.address), else the chain's native coin.
  function asset(inv) {
    const a = inv.asset || {};
    return {
      token: typeof a.address === "string" && /^0x[0-9a-fA-F]{40}$/.test(a.address) ? a.address : null,
      symbol: a.symbol || cfg.native_symbol,
      decimals: Number.isInteger(a.decimals) ? a.decimals : cfg.native_decimals,
    };
  }

  function amounts(inv) {
    const amount = big(inv.amount !== undefined ? inv.amount : inv.amount_wei);
    const paid = big(inv.paid !== undefined ? inv.paid : inv.paid_wei);
    const rem = inv.remaining !== undefined ? inv.remaining : inv.remaining_wei;
    const remaining = rem !== undefined ? big(rem) : amount > paid ? amount - paid : 0n;
    return { amount, paid, remaining };
  }

  function networkName(inv) {
    return cfg.chain_name ? t("network", { name: cfg.chain_name, id: inv.chain_id }) : t("network_unnamed", { id: inv.chain_id });
  }

  // ---- state ----
  let token = "";
  try {
    token = decodeURIComponent(location.hash.slice(1));
  } catch (e) {
    // a malformed escape: not a token
  }
  const api = new URL("v1/public/invoice", location.href.split("#")[0].replace(/[^/]*$/, ""));
  let inv = null;
  let skew = 0; // server clock minus ours, from the Date header
  let lastState = "";
  let lastStatusText = "";
  let qrFor = "";
  let qrURL = "";
  let failures = 0;

  function show(section, on) {
    $(section).hidden = !on;
  }

  function setStatus(text, kind) {
    const el = $("status");
    if (text !== lastStatusText) {
      el.textContent = text; // role=status, aria-live: announced on change only
      lastStatusText = text;
    }
    el.className = "status" + (kind ? " status-" + kind : "");
  }

  function setText(id, text) {
    const el = $(id);
    if (el.textContent !== text) el.textContent = text;
  }

  function invalid() {
    inv = null;
    ["details", "progress", "pay", "done", "expired"].forEach((s) => show(s, false));
    show("invalid", true);
    setStatus(t("status_invalid"), "bad");
  }

  // ---- polling ----
  async function poll() {
    try {
      const res = await fetch(api, {
        headers: { Authorization: "Bearer " + token, Accept: "application/json" },
        cache: "no-store",
        credentials: "omit",
        referrerPolicy: "no-referrer",
      });
      if (res.status === 401 || res.status === 404) {
        invalid();
        return; // a wrong token stays wrong: stop polling
      }
      if (!res.ok) throw new Error("HTTP " + res.status);
      const date = Date.parse(res.headers.get("Date") || "");
      if (!Number.isNaN(date)) skew = date - Date.now();
      inv = await res.json();
      failures = 0;
      render();
    } catch (e) {
      failures++;
      if (failures >= 3) setStatus(t("status_offline"), "warn");
    }
    const s = inv && inv.status;
    if (s !== "SETTLED" && !(s === "EXPIRED" && !inv.paid_late)) {
      setTimeout(poll, cfg.poll_ms);
    } else if (s === "EXPIRED") {
      setTimeout(poll, cfg.poll_ms * 10); // a late payment may still arrive
    }
  }

  // ---- rendering ----
  function state(inv, a) {
    switch (inv.status) {
      case "PENDING":
        return a.paid > 0n ? "underpaid" : expiredLocally(inv) ? "expired" : "pending";
      case "PAID":
        return "seen";
      case "CONFIRMED":
      case "SETTLED":
        return "done";
      case "EXPIRED":
        return "expired";
    }
    return "pending";
  }

  function expiredLocally(inv) {
    return Date.parse(inv.expires_at) <= Date.now() + skew;
  }

  function render() {
    const as = asset(inv);
    const a = amounts(inv);
    const st = state(inv, a);
    const fmt = (v) => formatUnits(v, as.decimals);
    const args = { paid: fmt(a.paid), amount: fmt(a.amount), remaining: fmt(a.remaining), symbol: as.symbol,
      n: inv.confirmations, required: inv.confirmations_required, hours: cfg.late_hours };

    show("invalid", false);
    show("details", true);
    setText("merchant", inv.merchant_name || "");
    setText("description", inv.description || "");
    setText("order", inv.order_id || "");
    $("row-description").hidden = !inv.description;
    $("row-order").hidden = !inv.order_id;
    const due = st === "underpaid" ? a.remaining : a.amount;
    setText("amount-label", st === "underpaid" ? t("label_remaining") : t("label_amount"));
    setText("amount", fmt(due));
    setText("symbol", as.symbol);
    setText("network", networkName(inv));
    // A payer sending by hand must pick the right token: show its contract.
    $("row-token").hidden = !as.token;
    setText("token-contract", as.token || "");

    const paying = st === "pending" || st === "underpaid";
    show("pay", paying);
    show("progress", st === "seen" || st === "underpaid");
    show("done", st === "done");
    show("expired", st === "expired");

    if (paying) {
      const uri = inv.remaining_payment_uri || inv.payment_uri;
      setText("address", inv.deposit_address);
      $("open-wallet").href = uri;
      $("copy-amount").dataset.copy = fmt(due);
      $("copy-address").dataset.copy = inv.deposit_address;
      $("pay-browser").dataset.due = due.toString();
      loadQR(uri);
    }
    const bar = $("conf-bar");
    bar.max = inv.confirmations_required;
    bar.value = inv.confirmations;
    setText("conf-text", t("confirmations", args));

    let text, kind = "";
    switch (st) {
      case "pending":
        text = t("status_pending");
        break;
      case "underpaid":
        text = t("status_underpaid", args);
        kind = "warn";
        break;
      case "seen":
        text = t("status_seen", args);
        if (inv.overpaid) text += " " + t("status_overpaid", args);
        break;
      case "done": {
        text = t(inv.status === "SETTLED" ? "status_settled" : "status_confirmed");
        kind = "good";
        setText("done-detail", t("success_detail", args) + (inv.overpaid ? " " + t("status_overpaid", args) : ""));
        const back = $("return");
        const r = inv.redirect_url;
        if (typeof r === "string" && /^https?:\/\//i.test(r)) {
          back.href = r;
          back.hidden = false;
        } else {
          back.hidden = true;
        }
        break;
      }
      case "expired":
        text = t("status_expired");
        kind = "bad";
        setText("expired-detail", t("expired_late", args));
        break;
    }
    setStatus(text, kind);
    lastState = st;
    tick();
  }

  // ---- countdown ----
  function tick() {
    if (!inv || !(lastState === "pending" || lastState === "underpaid")) return;
    const left = Math.max(0, Math.floor((Date.parse(inv.expires_at) - (Date.now() + skew)) / 1000));
    const h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
    const mmss = String(m).padStart(h ? 2 : 1, "0") + ":" + String(s).padStart(2, "0");
    setText("countdown", t("expires_in", { time: (h ? h + ":" : "") + mmss }));
    if (left === 0 && lastState === "pending") render();
  }
  setInterval(tick, 1000);

  // ---- QR: the API's SVG for what is due now, shown through a blob: URL ----
  async function loadQR(uri) {
    if (uri === qrFor) return;
    qrFor = uri;
    try {
      const res = await fetch(new URL("invoice/qr.svg", api.href.replace(/invoice$/, "")), {
        headers: { Authorization: "Bearer " + token },
        cache: "no-store",
        credentials: "omit",
      });
      if (!res.ok) throw new Error("HTTP " + res.status);
      const svg = await res.text();
      if (qrFor !== uri) return;
      if (qrURL) URL.revokeObjectURL(qrURL);
      qrURL = URL.createObjectURL(new Blob([svg], { type: "image/svg+xml" }));
      const img = $("qr");
      // A whole number of pixels per module keeps every module the same
      // size on screen, which scanners like.
      const m = /viewBox="0 0 (\d+) /.exec(svg);
      if (m) {
        const n = Number(m[1]);
        img.width = img.height = n * Math.max(3, Math.floor(240 / n));
      }
      img.src = qrURL;
      img.dataset.uri = uri;
    } catch (e) {
      qrFor = ""; // retried on the next poll
    }
  }

  // ---- copy buttons ----
  async function copy(ev) {
    const text = ev.currentTarget.dataset.copy || "";
    try {
      await navigator.clipboard.writeText(text);
      setText("copy-msg", t("copied"));
    } catch (e) {
      setText("copy-msg", t("copy_failed"));
    }
  }
  $("copy-address").addEventListener("click", copy);
  $("copy-amount").addEventListener("click", copy);

  // ---- browser wallet (EIP-1193) ----
  function hex(v) {
    return "0x" + v.toString(16);
  }

  // transferData encodes ERC-20 transfer(address,uint256).
  function transferData(to, amount) {
    return "0xa9059cbb" + to.slice(2).toLowerCase().padStart(64, "0") + amount.toString(16).padStart(64, "0");
  }

  function walletMessage(e) {
    const code = e && (e.code !== undefined ? e.code : e.data && e.data.originalError && e.data.originalError.code);
    switch (code) {
      case 4001:
        return t("wallet_rejected");
      case -32002:
        return t("wallet_pending");
      case 4100:
        return t("wallet_unauthorized");
      case 4900:
      case 4901:
        return t("wallet_disconnected");
    }
    return t("wallet_error", { message: (e && e.message) || String(e) });
  }

  async function switchChain(eth) {
    const chainId = hex(BigInt(inv.chain_id));
    try {
      await eth.request({ method: "wallet_switchEthereumChain", params: [{ chainId }] });
      return;
    } catch (e) {
      const code = e && (e.code !== undefined ? e.code : e.data && e.data.originalError && e.data.originalError.code);
      if (code !== 4902) {
        if (code === 4001) throw e;
        throw Object.assign(new Error(t("wallet_chain", { network: networkName(inv) })), { code: "chain" });
      }
    }
    // The wallet does not know the chain: offer it, with our RPC proxy.
    const params = {
      chainId,
      chainName: cfg.chain_name || "Chain " + inv.chain_id,
      nativeCurrency: { name: cfg.native_symbol, symbol: cfg.native_symbol, decimals: cfg.native_decimals },
      rpcUrls: cfg.rpc_url ? [cfg.rpc_url] : [],
    };
    await eth.request({ method: "wallet_addEthereumChain", params: [params] });
  }

  async function payWithWallet() {
    const msg = (text) => setText("wallet-msg", text);
    const eth = window.ethereum;
    if (!eth || typeof eth.request !== "function") {
      msg(t("wallet_none"));
      return;
    }
    const btn = $("pay-browser");
    btn.disabled = true;
    try {
      msg(t("wallet_confirm"));
      const accounts = await eth.request({ method: "eth_requestAccounts" });
      if (!Array.isArray(accounts) || !accounts.length) throw Object.assign(new Error(t("wallet_no_account")), { code: "account" });
      await switchChain(eth);
      const due = BigInt(btn.dataset.due || "0");
      const as = asset(inv);
      const tx = as.token
        ? { from: accounts[0], to: as.token, value: "0x0", data: transferData(inv.deposit_address, due) }
        : { from: accounts[0], to: inv.deposit_address, value: hex(due) };
      const hash = await eth.request({ method: "eth_sendTransaction", params: [tx] });
      msg(t("wallet_sent", { hash: String(hash) }));
    } catch (e) {
      msg(e && (e.code === "chain" || e.code === "account") ? e.message : walletMessage(e));
    } finally {
      btn.disabled = false;
    }
  }
  $("pay-browser").addEventListener("click", payWithWallet);

  // ---- start ----
  if (!/^[A-Za-z0-9_-]{16,64}$/.test(token)) {
    invalid();
  } else {
    poll();
  }
  window.addEventListener("hashchange", () => location.reload());
})();

// evmpay claim page: the payer names where a refund goes. No dependencies,
// no build step.
//
// The claim token is the URL fragment (#<token>), like the checkout's
// lookup token: never sent to a server, in no access log. The page reads
// the refund with it as a bearer token, takes the payer's address (typed,
// or from a browser wallet — never the address the payment came from,
// which may be an exchange's shared wallet), and follows the refund until
// it is confirmed. Amounts are BigInt base units; text is only ever set
// with textContent.
"use strict";

(function () {
  const body = document.body;
  const cfg = JSON.parse(body.dataset.config);
  const M = JSON.parse(body.dataset.messages);
  const lang = document.documentElement.lang || "en";
  const $ = (id) => document.getElementById(id);

  function t(key, args) {
    return (M[key] || key).replace(/\{(\w+)\}/g, (m, k) => (args && k in args ? String(args[k]) : m));
  }

  function formatUnits(v, decimals) {
    const base = 10n ** BigInt(decimals);
    const whole = (v / base).toString();
    const frac = decimals > 0 ? (v % base).toString().padStart(decimals, "0").replace(/0+$/, "") : "";
    return whole + (frac ? "." + frac : "");
  }
  const nf = new Intl.NumberFormat(lang);
  const mark = (nf.formatToParts(1.5).find((p) => p.type === "decimal") || { value: "." }).value;
  function local(plain) {
    const [whole, frac] = plain.split(".");
    return nf.format(BigInt(whole)) + (frac ? mark + frac : "");
  }
  function big(s) {
    return typeof s === "string" && /^[0-9]+$/.test(s) ? BigInt(s) : 0n;
  }

  let token = "";
  try {
    token = decodeURIComponent(location.hash.slice(1));
  } catch (e) {
    // a malformed escape: not a token
  }
  const root = location.href.split("#")[0].replace(/[^/]*$/, "");
  const api = new URL("v1/public/refund", root);
  const headers = (extra) => Object.assign({ Authorization: "Bearer " + token, Accept: "application/json" }, extra || {});
  const opts = { cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer" };
  let refund = null;
  let failures = 0;
  let lastStatusText = "";

  function show(id, on) {
    $(id).hidden = !on;
  }
  function setText(id, text) {
    const el = $(id);
    if (el.textContent !== text) el.textContent = text;
  }
  function setStatus(text, kind) {
    const el = $("status");
    if (text !== lastStatusText) {
      el.textContent = text;
      lastStatusText = text;
    }
    el.className = "status" + (kind ? " status-" + kind : "");
  }

  function networkName(chainID) {
    return cfg.chain_name ? t("network", { name: cfg.chain_name, id: chainID }) : t("network_unnamed", { id: chainID });
  }
  function explorer(hash) {
    return cfg.explorer_tx && /^0x[0-9a-fA-F]{64}$/.test(hash || "") ? cfg.explorer_tx.replace("{tx}", hash) : "";
  }

  function invalid() {
    ["details", "claim"].forEach((s) => show(s, false));
    show("invalid", true);
    setStatus(t("claim_status_invalid"), "bad");
  }

  async function poll() {
    try {
      const res = await fetch(api, Object.assign({ headers: headers() }, opts));
      if (res.status === 401 || res.status === 404) {
        invalid();
        return;
      }
      if (!res.ok) throw new Error("HTTP " + res.status);
      refund = await res.json();
      failures = 0;
      render();
    } catch (e) {
      failures++;
      if (failures >= 3) setStatus(t("claim_status_offline"), "warn");
    }
    const s = refund && refund.status;
    if (s === "CONFIRMED" || s === "FAILED" || s === "CANCELLED") return;
    setTimeout(poll, cfg.poll_ms);
  }

  const STATUS = {
    AWAITING_DESTINATION: ["claim_status_destination", ""],
    AWAITING_APPROVAL: ["claim_status_approval", ""],
    QUEUED: ["claim_status_queued", ""],
    AWAITING_PAYMENT: ["claim_status_merchant", ""],
    BROADCAST: ["claim_status_sent", ""],
    CONFIRMED: ["claim_status_confirmed", "good"],
    FAILED: ["claim_status_failed", "bad"],
    CANCELLED: ["claim_status_cancelled", "bad"],
  };

  function render() {
    const a = refund.asset || {};
    const decimals = Number.isInteger(a.decimals) ? a.decimals : cfg.native_decimals;
    const symbol = a.symbol || cfg.native_symbol;
    const token = typeof a.address === "string" && /^0x[0-9a-fA-F]{40}$/.test(a.address) ? a.address : "";
    show("invalid", false);
    show("details", true);
    setText("merchant", refund.merchant_name || "");
    setText("amount", local(formatUnits(big(refund.amount), decimals)));
    setText("symbol", symbol);
    setText("network", networkName(refund.chain_id));
    setText("order", refund.order_id || "");
    setText("description", refund.description || "");
    $("row-order").hidden = !refund.order_id;
    $("row-description").hidden = !refund.description;
    $("row-token").hidden = !token;
    setText("token-contract", token);
    $("row-destination").hidden = !refund.destination;
    setText("destination", refund.destination || "");
    $("row-tx").hidden = !refund.tx_hash;
    setText("tx", refund.tx_hash || "");
    const href = explorer(refund.tx_hash);
    const l = $("tx-explorer");
    if (href) l.href = href;
    l.hidden = !href;

    const claiming = refund.status === "AWAITING_DESTINATION";
    const wasShown = !$("claim").hidden;
    show("claim", claiming);
    if (claiming) {
      const args = { symbol, network: networkName(refund.chain_id) };
      setText("claim-guard", t(token ? "claim_guard_token" : "claim_guard", args));
      setText("confirm-label", t("claim_confirm", args));
      $("use-wallet").hidden = !wallet();
      if (!wasShown) $("address").focus();
    }
    const [key, kind] = STATUS[refund.status] || ["claim_status_queued", ""];
    setStatus(t(key, { symbol }), kind);
  }

  // ---- the address ----
  function wallet() {
    const eth = window.ethereum;
    return eth && typeof eth.request === "function" ? eth : null;
  }
  window.addEventListener("ethereum#initialized", () => refund && render());

  $("use-wallet").addEventListener("click", async () => {
    const eth = wallet();
    if (!eth) return;
    try {
      const accounts = await eth.request({ method: "eth_requestAccounts" });
      if (Array.isArray(accounts) && accounts.length && /^0x[0-9a-fA-F]{40}$/.test(accounts[0])) {
        $("address").value = accounts[0];
        setText("claim-msg", "");
        $("address").removeAttribute("aria-invalid");
        $("confirm").focus();
      } else {
        setText("claim-msg", t("claim_wallet_none"));
      }
    } catch (e) {
      setText("claim-msg", e && e.code === 4001 ? t("wallet_rejected") : t("claim_wallet_none"));
    }
  });

  const PROBLEMS = {
    invalid_address: "claim_error_address",
    destination_reserved: "claim_error_reserved",
    destination_contract: "claim_error_contract",
    state_conflict: "claim_error_taken",
    rate_limited: "claim_error_busy",
  };

  $("claim-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const input = $("address");
    const address = input.value.trim();
    const fail = (key) => {
      setText("claim-msg", t(key));
      input.setAttribute("aria-invalid", "true");
      input.focus();
    };
    if (!/^0x[0-9a-fA-F]{40}$/.test(address)) return fail("claim_error_address");
    if (!$("confirm").checked) {
      setText("claim-msg", t("claim_error_confirm"));
      $("confirm").focus();
      return;
    }
    const btn = $("submit");
    btn.disabled = true;
    setText("claim-msg", "");
    try {
      const res = await fetch(new URL("v1/public/refund/destination", root), Object.assign({
        method: "POST", headers: headers({ "Content-Type": "application/json" }), body: JSON.stringify({ destination: address }),
      }, opts));
      if (res.ok) {
        input.removeAttribute("aria-invalid");
        refund = await res.json();
        render();
        setTimeout(poll, cfg.poll_ms);
        return;
      }
      let code = "";
      try {
        code = (await res.json()).code || "";
      } catch (e) {
        // not a problem document
      }
      if (res.status === 401) return invalid();
      fail(PROBLEMS[code] || "claim_error_other");
    } catch (e) {
      fail("claim_error_other");
    } finally {
      btn.disabled = false;
    }
  });

  document.querySelectorAll(".langs a").forEach((a) => (a.href = a.getAttribute("href").split("#")[0] + location.hash));
  if (!/^[A-Za-z0-9_-]{16,64}$/.test(token)) {
    invalid();
  } else {
    poll();
  }
  window.addEventListener("hashchange", () => location.reload());
})();

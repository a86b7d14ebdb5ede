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
  const lang = document.documentElement.lang || "en";
  const $ = (id) => document.getElementById(id);

  // t formats message key with {name} placeholders.
  function t(key, args) {
    return (M[key] || key).replace(/\{(\w+)\}/g, (m, k) => (args && k in args ? String(args[k]) : m));
  }

  // ---- amounts: exact, shown in the payer's locale ----

  // formatUnits renders base units exactly: formatUnits(500000000000000000n, 18) is "0.5".
  function formatUnits(v, decimals) {
    const base = 10n ** BigInt(decimals);
    const whole = (v / base).toString();
    const frac = decimals > 0 ? (v % base).toString().padStart(decimals, "0").replace(/0+$/, "") : "";
    return whole + (frac ? "." + frac : "");
  }

  // local shows an exact decimal string with the locale's grouping and
  // decimal mark ("1234.5" is "1.234,5" in German): Intl formats the whole
  // part as a BigInt, the digits after the mark are kept as they are.
  const nf = new Intl.NumberFormat(lang);
  const mark = (nf.formatToParts(1.5).find((p) => p.type === "decimal") || { value: "." }).value;
  function local(plain) {
    const [whole, frac] = plain.split(".");
    return nf.format(BigInt(whole)) + (frac ? mark + frac : "");
  }

  const df = new Intl.DateTimeFormat(lang, { dateStyle: "medium", timeStyle: "medium" });
  function when(iso) {
    const ms = Date.parse(iso || "");
    return Number.isNaN(ms) ? "" : df.format(ms);
  }

  function big(s) {
    return typeof s === "string" && /^[0-9]+$/.test(s) ? BigInt(s) : 0n;
  }

  // ---- fiat: an invoice priced in a currency, paid in the asset the payer picks ----
  let chosen = 0; // the picked quote of a fiat invoice
  function quote(inv) {
    return inv.price && Array.isArray(inv.quotes) && inv.quotes.length ? inv.quotes[Math.min(chosen, inv.quotes.length - 1)] : null;
  }
  // money shows an exact fiat amount in the payer's locale: "49,90 EUR".
  function money(f) {
    return f && typeof f.amount === "string" ? local(f.amount) + " " + f.currency : "";
  }

  // ---- networks: the chain being paid decides the name, the native coin,
  // the wallet's chain and the explorer links ----
  // net is the settings of chain id: its listed network (nothing inherited), else the top-level ones.
  const net = (id) => (cfg.networks && Object.hasOwn(cfg.networks, id) ? { native_decimals: 18, ...cfg.networks[id] } : cfg);
  // chainOf is the chain a quote or payment is on: its own chain_id, else the invoice's.
  function chainOf(x, inv) {
    return x && Number.isSafeInteger(x.chain_id) && x.chain_id > 0 ? x.chain_id : inv.chain_id;
  }
  // payChain is the chain being paid: the picked quote's, else the invoice's.
  const payChain = (inv) => chainOf(quote(inv), inv);
  // delayed: the deployment sees payments on chain id late for now (its
  // parts stopped); one sent there is safe and shows once they run again.
  const delayed = (inv, id) => Array.isArray(inv.delayed_chains) && inv.delayed_chains.includes(id);
  // multiChain: a fiat invoice whose quotes span more than one chain.
  const multiChain = (inv) => !!inv.price && Array.isArray(inv.quotes) && new Set(inv.quotes.map((q) => chainOf(q, inv))).size > 1;

  // asset describes what the payer pays in: a token when the API names
  // one (asset.address), else the chain's native coin; for a fiat invoice,
  // the quote the payer picked.
  function asset(inv) {
    const q = quote(inv);
    const a = (q ? q.asset : inv.asset) || {};
    const n = net(payChain(inv));
    return {
      token: typeof a.address === "string" && /^0x[0-9a-fA-F]{40}$/.test(a.address) ? a.address : null,
      symbol: a.symbol || n.native_symbol,
      decimals: Number.isInteger(a.decimals) ? a.decimals : n.native_decimals,
    };
  }

  function amounts(inv) {
    const q = quote(inv);
    if (q) return { amount: big(q.amount), paid: big(q.paid), remaining: big(q.remaining) };
    const amount = big(inv.amount !== undefined ? inv.amount : inv.amount_wei);
    const paid = big(inv.paid !== undefined ? inv.paid : inv.paid_wei);
    const rem = inv.remaining !== undefined ? inv.remaining : inv.remaining_wei;
    const remaining = rem !== undefined ? big(rem) : amount > paid ? amount - paid : 0n;
    return { amount, paid, remaining };
  }

  // networkName is "evmd, chain id 9000"; shortName "evmd" (the picker's).
  function networkName(id) {
    const name = net(id).chain_name;
    return name ? t("network", { name, id }) : t("network_unnamed", { id });
  }
  const shortName = (id) => net(id).chain_name || t("network_unnamed", { id });

  // explorer fills the explorer URL template of chain id, or "" when none.
  function explorer(kind, value, id) {
    const tpl = net(id)["explorer_" + kind];
    const ok = kind === "tx" ? /^0x[0-9a-fA-F]{64}$/ : /^0x[0-9a-fA-F]{40}$/;
    return tpl && ok.test(value) ? tpl.replace("{" + kind + "}", value) : "";
  }

  // ---- the clock: the device's, corrected by the server's Date ----
  // The Date header has whole seconds and is stamped before the answer
  // travels, so (Date - now) is at most the true difference, and 500 ms
  // more is its middle: keep the largest such estimate, so the countdown
  // never steps back, unless the device clock jumped ahead (an estimate
  // more than 5 s lower).
  let skew = null;
  const now = () => Date.now() + (skew || 0);
  function learnSkew(res) {
    const d = Date.parse(res.headers.get("Date") || "");
    if (Number.isNaN(d)) return;
    const s = d + 500 - Date.now();
    if (skew === null || s > skew || s < skew - 5000) skew = s;
  }

  // ---- state ----
  let token = "";
  try {
    token = decodeURIComponent(location.hash.slice(1));
  } catch (e) {
    // a malformed escape: not a token
  }
  const api = new URL("v1/public/invoice", location.href.split("#")[0].replace(/[^/]*$/, ""));
  const apiPath = (p) => new URL(p, api.href.replace(/invoice$/, ""));
  const auth = (accept) => ({ headers: { Authorization: "Bearer " + token, Accept: accept || "*/*" }, cache: "no-store",
    credentials: "omit", referrerPolicy: "no-referrer" });
  let inv = null;
  let lastState = "";
  let lastStatusText = "";
  let qrFor = "";
  let qrURL = "";
  let failures = 0;
  let branded = false;
  let redirectAt = 0;
  let stayed = false;
  let receiptText = "";
  let receiptURL = "";

  function show(id, on) {
    $(id).hidden = !on;
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

  const SECTIONS = ["details", "delayed", "pay", "progress", "done", "expired", "return-row", "receipt", "invalid"];

  function invalid() {
    inv = null;
    SECTIONS.forEach((s) => show(s, s === "invalid"));
    setStatus(t("status_invalid"), "bad");
  }

  // ---- polling ----
  async function poll() {
    try {
      const res = await fetch(api, auth("application/json"));
      if (res.status === 401 || res.status === 404) {
        invalid();
        return; // a wrong token stays wrong: stop polling
      }
      if (!res.ok) throw new Error("HTTP " + res.status);
      learnSkew(res);
      inv = await res.json();
      failures = 0;
      render();
      if (!branded) brand();
    } catch (e) {
      failures++;
      if (failures >= 3) setStatus(t("status_offline"), "warn");
    }
    const s = inv && inv.status;
    if (s === "CONFIRMED" || s === "SETTLED") return; // the payer's part is done
    setTimeout(poll, s === "EXPIRED" ? cfg.poll_ms * 10 : cfg.poll_ms); // a late payment may still arrive
  }

  // ---- branding: the merchant's accent colour and logo, read once ----
  async function brand() {
    branded = true;
    try {
      const res = await fetch(apiPath("invoice/branding"), auth());
      if (!res.ok) return;
      const b = await res.json();
      if (/^#[0-9a-f]{6}$/.test(b.accent_color || "")) {
        const root = document.documentElement.style; // CSSOM, allowed by the CSP
        root.setProperty("--accent", b.accent_color);
        root.setProperty("--accent-fg", contrastText(b.accent_color));
      }
      if (b.logo_url) {
        const img = await fetch(apiPath("invoice/logo"), auth());
        if (!img.ok) return;
        const blob = await img.blob();
        if (!/^image\/(png|jpeg)$/.test(blob.type)) return;
        $("logo").src = URL.createObjectURL(blob);
        show("logo", true);
      }
    } catch (e) {
      // the page's own look
    }
  }

  // contrastText picks black or white text for a background colour, the
  // one with the higher WCAG contrast.
  function contrastText(hex) {
    const lin = (i) => {
      const c = parseInt(hex.slice(i, i + 2), 16) / 255;
      return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4);
    };
    const l = 0.2126 * lin(1) + 0.7152 * lin(3) + 0.0722 * lin(5);
    return (l + 0.05) / 0.05 >= 1.05 / (l + 0.05) ? "#000" : "#fff";
  }

  // ---- rendering ----
  function state(inv, a) {
    const part = quote(inv) ? Array.isArray(inv.payments) && inv.payments.length > 0 : a.paid > 0n;
    switch (inv.status) {
      case "PENDING":
        return part ? "underpaid" : expiredLocally(inv) ? "expired" : "pending";
      case "PAID":
        return "seen";
      case "CONFIRMED":
      case "SETTLED":
        return "done"; // the payer's final state: the sweep is the merchant's business
      case "EXPIRED":
        return "expired";
    }
    return "pending";
  }

  function expiredLocally(inv) {
    return Date.parse(inv.expires_at) <= now();
  }

  function render() {
    const as = asset(inv);
    const a = amounts(inv);
    const st = state(inv, a);
    const fmt = (v) => local(formatUnits(v, as.decimals));
    const q = quote(inv);
    const args = { paid: fmt(a.paid), amount: fmt(a.amount), remaining: fmt(a.remaining), symbol: as.symbol,
      n: inv.confirmations, required: inv.confirmations_required, hours: cfg.late_hours, network: networkName(payChain(inv)) };
    if (q) {
      // The fiat invoice speaks in its currency; the crypto amount due now follows.
      Object.assign(args, { price: money(inv.price), paid: money(inv.paid_value), remaining: money(inv.remaining_value),
        amount: fmt(a.remaining), currency: inv.price.currency, rate: local(q.rate) });
    }
    const paying = st === "pending" || st === "underpaid";
    const final = st === "done" || st === "expired";
    const payments = Array.isArray(inv.payments) ? inv.payments : [];

    show("invalid", false);
    show("details", true);
    setText("merchant", inv.merchant_name || "");
    setText("heading", st === "expired" ? t("heading_expired") : t("heading"));
    setText("description", inv.description || "");
    setText("order", inv.order_id || "");
    $("row-description").hidden = !inv.description;
    $("row-order").hidden = !inv.order_id;
    renderDue(st, as, a, fmt);
    renderChoice(inv, fmt, paying);
    $("row-paid").hidden = st !== "underpaid";
    setText("paid-so-far", t(q ? "of_fiat" : "of", args));
    setText("network", args.network);
    // A payer sending by hand must pick the right token: show its contract.
    $("row-token").hidden = !as.token;
    setText("token-contract", as.token || "");
    $("copy-contract").dataset.copy = as.token || "";
    link("token-explorer", explorer("address", as.token || "", payChain(inv)));

    show("pay", paying);
    show("progress", st === "seen" || st === "underpaid");
    show("done", st === "done");
    show("expired", st === "expired");
    show("receipt", payments.length > 0 || st === "done");

    if (paying) {
      const uri = q ? q.payment_uri || "" : inv.remaining_payment_uri || inv.payment_uri;
      setText("guard", t(as.token ? "send_only_token" : "send_only", args));
      setText("fee-note", t("fee_note", { amount: fmt(st === "underpaid" ? a.remaining : a.amount), symbol: as.symbol }));
      setText("address", inv.deposit_address);
      $("open-wallet").href = uri;
      $("copy-address").dataset.copy = inv.deposit_address;
      $("pay-browser").dataset.due = (st === "underpaid" ? a.remaining : a.amount).toString();
      $("pay-browser").hidden = !wallet();
      // With quotes on several chains the asset alone may be ambiguous: the chain too.
      loadQR(uri, q ? as.token || as.symbol : "", q && multiChain(inv) ? payChain(inv) : 0);
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
        text = t(q ? "status_underpaid_fiat" : "status_underpaid", args);
        kind = "warn";
        break;
      case "seen":
        text = t("status_seen", args);
        if (inv.overpaid) text += " " + t(q ? "status_overpaid_fiat" : "status_overpaid", args);
        break;
      case "done":
        text = t("status_confirmed");
        kind = "good";
        setText("done-detail", t(q ? "success_detail_fiat" : "success_detail", args) +
          (inv.overpaid ? " " + t(q ? "status_overpaid_fiat" : "status_overpaid", args) : ""));
        break;
      case "expired":
        text = t("status_expired");
        kind = "bad";
        setText("expired-detail", t("expired_late", args));
        break;
    }
    setStatus(text, kind);
    // Paying, or waiting for confirmations, on a chain seen late for now.
    setText("delayed", t("delayed", args));
    show("delayed", (paying || st === "seen") && delayed(inv, payChain(inv)));
    offerReturn(final, st === "done");
    renderReceipt(st, as, a, fmt, payments);
    lastState = st;
    countdown();
  }

  // renderDue is the headline: what the payer must pay now. For a fiat
  // invoice the headline is the price (what remains of it once part was
  // paid) and the exact crypto amount of the picked asset follows, with
  // the copy button beside it.
  function renderDue(st, as, a, fmt) {
    const q = quote(inv);
    const due = st === "underpaid" || q ? a.remaining : a.amount;
    const paying = st === "pending" || st === "underpaid";
    setText("amount-label", st === "underpaid" ? t("label_remaining") : t("label_amount"));
    if (q) {
      const f = st === "underpaid" ? inv.remaining_value : inv.price;
      setText("amount", local(f.amount));
      setText("symbol", f.currency);
      setText("amount-sub-text", t("pay_exactly", { amount: fmt(due), symbol: as.symbol }));
      setText("rate-line", t("rate_locked", { symbol: as.symbol, rate: local(q.rate), currency: inv.price.currency }));
      if ($("copy-amount").parentNode.id !== "amount-sub") $("amount-sub").append($("copy-amount"));
    } else {
      setText("amount", fmt(due));
      setText("symbol", as.symbol);
    }
    show("amount-sub", !!q && paying);
    show("rate-line", !!q && paying);
    // The copy button copies the plain exact number wallets take: "0.5", never "0,5".
    $("copy-amount").dataset.copy = formatUnits(due, as.decimals);
    show("copy-amount", paying);
  }

  // renderChoice offers the accepted assets of a fiat invoice, each with
  // its exact amount due now, as radio buttons; the pick drives the rest
  // of the page (amount, network, guard, URI, QR, wallet button). Quotes on
  // more than one chain each name their network ("USDC · evmd"). The list
  // is rebuilt only when it changes, so arrow keys keep their place.
  let choiceKey = "";
  function renderChoice(inv, fmt, paying) {
    const qs = inv.price && Array.isArray(inv.quotes) ? inv.quotes : [];
    show("choice", paying && qs.length > 1);
    if (qs.length < 2) return;
    const multi = multiChain(inv);
    const labels = qs.map((q) => {
      const a = q.asset || {};
      const id = chainOf(q, inv);
      const n = net(id);
      const symbol = a.symbol || n.native_symbol;
      const d = Number.isInteger(a.decimals) ? a.decimals : n.native_decimals;
      const name = multi ? t("asset_network", { symbol, network: shortName(id) }) : symbol;
      return [delayed(inv, id) ? t("choice_delayed", { name }) : name, local(formatUnits(big(q.remaining), d)) + " " + symbol];
    });
    setText("choice-hint", multi ? t("choice_networks") : "");
    show("choice-hint", multi);
    if (multi) $("choice").setAttribute("aria-describedby", "choice-hint");
    else $("choice").removeAttribute("aria-describedby");
    const box = $("choices");
    const key = JSON.stringify(labels);
    if (key !== choiceKey) {
      choiceKey = key;
      const focused = box.contains(document.activeElement);
      box.replaceChildren();
      labels.forEach(([name, amount], i) => {
        const label = document.createElement("label");
        const input = document.createElement("input");
        input.type = "radio";
        input.name = "asset";
        input.value = String(i);
        input.addEventListener("change", () => {
          chosen = i;
          render();
        });
        const n = document.createElement("span");
        n.textContent = name;
        const amt = document.createElement("span");
        amt.className = "amt";
        amt.textContent = amount;
        label.append(input, n, " ", amt);
        box.append(label);
      });
      if (focused) box.children[Math.min(chosen, qs.length - 1)].querySelector("input").focus();
    }
    box.querySelectorAll("input").forEach((input, i) => (input.checked = i === Math.min(chosen, qs.length - 1)));
  }

  function link(id, href) {
    const a = $(id);
    if (href) a.href = href;
    a.hidden = !href;
  }

  // ---- return to the merchant: offered on every final state; sent there
  // automatically once the payment is confirmed, after cfg.redirect_ms ----
  function offerReturn(final, done) {
    const r = inv.redirect_url;
    const ok = typeof r === "string" && /^https?:\/\//i.test(r);
    show("return-row", final && ok);
    if (final && ok) $("return").href = r;
    if (done && ok && cfg.redirect_ms >= 0 && !stayed && !redirectAt) redirectAt = now() + cfg.redirect_ms;
    show("redirect-note", redirectAt > 0 && !stayed);
  }

  $("stay").addEventListener("click", () => {
    stayed = true;
    show("redirect-note", false);
    $("return").focus();
  });

  // ---- the countdown to expiry, and to the redirect ----
  // tick runs every second. Once the time is up it renders (state() then
  // says "expired"); render only updates the countdown, never calls tick.
  function tick() {
    if (inv && lastState === "pending" && expiredLocally(inv)) render();
    else countdown();
  }

  function countdown() {
    if (lastState === "pending" || lastState === "underpaid") {
      // Rounded up: "0:00" only once the time is up.
      const left = Math.max(0, Math.ceil((Date.parse(inv.expires_at) - now()) / 1000));
      const h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
      const mmss = String(m).padStart(h ? 2 : 1, "0") + ":" + String(s).padStart(2, "0");
      setText("countdown", t("expires_in", { time: (h ? h + ":" : "") + mmss }));
    }
    if (redirectAt > 0 && !stayed) {
      const left = Math.max(0, Math.ceil((redirectAt - now()) / 1000));
      setText("redirect-text", t("redirect_in", { s: left }));
      if (left === 0) {
        redirectAt = -1; // once
        location.assign(inv.redirect_url);
      }
    }
  }
  setInterval(tick, 1000);

  // ---- proof of payment: the transactions and a receipt to keep ----
  function renderReceipt(st, as, a, fmt, payments) {
    const q = quote(inv);
    const paidIn = (p) => {
      const pa = p.asset || {};
      return pa.symbol ? { symbol: pa.symbol, decimals: pa.decimals, token: pa.address } : as;
    };
    const assets = [...new Set(payments.map((p) => JSON.stringify(paidIn(p))))].map((s) => JSON.parse(s));
    // The networks the payments arrived on (each its own chain_id, else the invoice's), else the one being paid.
    const nets = [...new Set(payments.length ? payments.map((p) => chainOf(p, inv)) : [payChain(inv)])].map(networkName).join("; ");
    const assetText = (x) => (x.token ? t("receipt_asset_token", { symbol: x.symbol, address: x.token }) : t("receipt_asset_native", { symbol: x.symbol }));
    const rows = q ? [
      [t("receipt_invoice"), String(inv.invoice_id)],
      [t("receipt_merchant"), inv.merchant_name || ""],
      [t("label_order"), inv.order_id || ""],
      [t("label_description"), inv.description || ""],
      [t("receipt_price"), money(inv.price)],
      [t("receipt_paid"), money(inv.paid_value)],
      [t("receipt_asset"), (assets.length ? assets : [as]).map(assetText).join("; ")],
      [t("label_network"), nets],
      [t("label_address"), inv.deposit_address],
      [t("receipt_status"), t("receipt_status_" + st)],
      [t("receipt_created"), when(inv.created_at)],
      [t("receipt_paid_at"), when(inv.paid_at)],
      [t("receipt_confirmed_at"), when(inv.confirmed_at)],
    ].filter((r) => r[1]) : [
      [t("receipt_invoice"), String(inv.invoice_id)],
      [t("receipt_merchant"), inv.merchant_name || ""],
      [t("label_order"), inv.order_id || ""],
      [t("label_description"), inv.description || ""],
      [t("receipt_amount"), fmt(a.amount) + " " + as.symbol],
      [t("receipt_paid"), fmt(a.paid) + " " + as.symbol],
      [t("receipt_asset"), as.token ? t("receipt_asset_token", { symbol: as.symbol, address: as.token }) : t("receipt_asset_native", { symbol: as.symbol })],
      [t("label_network"), nets],
      [t("label_address"), inv.deposit_address],
      [t("receipt_status"), t("receipt_status_" + st)],
      [t("receipt_created"), when(inv.created_at)],
      [t("receipt_paid_at"), when(inv.paid_at)],
      [t("receipt_confirmed_at"), when(inv.confirmed_at)],
    ].filter((r) => r[1]);
    const txs = payments.map((p) => {
      const x = paidIn(p);
      const symbol = x.symbol + (p.value ? " (" + money(p.value) + ")" : "");
      return {
        hash: p.tx_hash,
        line: t("receipt_tx_line", { amount: local(formatUnits(big(p.amount), x.decimals)), symbol, block: p.block_number, time: when(p.seen_at) }),
        href: explorer("tx", p.tx_hash, chainOf(p, inv)),
      };
    });
    const text = [t("receipt_title"), ""].concat(rows.map((r) => r[0] + ": " + r[1]),
      txs.length ? ["", t("receipt_txs") + ":"] : [], txs.map((x) => "  " + x.hash + "\n    " + x.line + (x.href ? "\n    " + x.href : ""))).join("\n") + "\n";
    if (text === receiptText) return;
    receiptText = text;

    const dl = $("receipt-facts");
    dl.replaceChildren();
    const add = (label, node) => {
      const div = document.createElement("div");
      const dt = document.createElement("dt");
      const dd = document.createElement("dd");
      dt.textContent = label;
      dd.append(node);
      div.append(dt, dd);
      dl.append(div);
    };
    rows.forEach((r) => add(r[0], r[1]));
    if (txs.length) {
      const ul = document.createElement("ul");
      ul.className = "txs";
      txs.forEach((x) => {
        const li = document.createElement("li");
        const code = document.createElement("code");
        code.className = "mono";
        code.textContent = x.hash;
        const p = document.createElement("span");
        p.className = "small";
        p.textContent = x.line;
        li.append(code, document.createElement("br"), p);
        if (x.href) {
          const l = document.createElement("a");
          l.href = x.href;
          l.target = "_blank";
          l.rel = "noopener noreferrer";
          l.className = "no-print";
          l.textContent = t("explorer");
          li.append(" ", l);
        }
        ul.append(li);
      });
      add(t("receipt_txs"), ul);
    }
    if (receiptURL) URL.revokeObjectURL(receiptURL);
    receiptURL = URL.createObjectURL(new Blob([text], { type: "text/plain;charset=utf-8" }));
    const d = $("download");
    d.href = receiptURL;
    d.download = "receipt-" + inv.invoice_id + ".txt";
  }
  $("print").addEventListener("click", () => window.print());

  // ---- QR: the API's SVG for what is due now, shown through a blob: URL ----
  async function loadQR(uri, pick, chain) {
    if (uri === qrFor) return;
    qrFor = uri;
    try {
      const path = apiPath("invoice/qr.svg");
      if (pick) path.searchParams.set("asset", pick);
      if (chain) path.searchParams.set("chain_id", String(chain));
      const res = await fetch(path, auth());
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

  // ---- copy buttons, each beside the value it copies ----
  async function copy(ev) {
    const text = ev.currentTarget.dataset.copy || "";
    try {
      await navigator.clipboard.writeText(text);
      setText("copy-msg", t("copied", { text }));
    } catch (e) {
      setText("copy-msg", t("copy_failed"));
    }
  }
  ["copy-address", "copy-amount", "copy-contract"].forEach((id) => $(id).addEventListener("click", copy));

  // ---- browser wallet (EIP-1193), offered only when one is present ----
  function wallet() {
    const eth = window.ethereum;
    return eth && typeof eth.request === "function" ? eth : null;
  }
  window.addEventListener("ethereum#initialized", () => inv && render());

  function hex(v) {
    return "0x" + v.toString(16);
  }

  // transferData encodes ERC-20 transfer(address,uint256).
  function transferData(to, amount) {
    return "0xa9059cbb" + to.slice(2).toLowerCase().padStart(64, "0") + amount.toString(16).padStart(64, "0");
  }

  function code(e) {
    return e && (e.code !== undefined ? e.code : e.data && e.data.originalError && e.data.originalError.code);
  }

  function walletMessage(e) {
    switch (code(e)) {
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

  // switchChain asks the wallet for chain id (EIP-3326) and, when it does
  // not know it (4902), offers it (EIP-3085) with that chain's settings.
  async function switchChain(eth, id) {
    const chainId = hex(BigInt(id));
    try {
      await eth.request({ method: "wallet_switchEthereumChain", params: [{ chainId }] });
      return;
    } catch (e) {
      const c = code(e);
      if (c !== 4902) {
        if (c === 4001) throw e;
        throw Object.assign(new Error(t("wallet_chain", { network: networkName(id) })), { code: "chain" });
      }
    }
    const n = net(id);
    const params = {
      chainId,
      chainName: n.chain_name || "Chain " + id,
      nativeCurrency: { name: n.native_symbol, symbol: n.native_symbol, decimals: n.native_decimals },
    };
    if (n.rpc_url) params.rpcUrls = [n.rpc_url];
    if (n.explorer) params.blockExplorerUrls = [n.explorer];
    await eth.request({ method: "wallet_addEthereumChain", params: [params] });
  }

  async function payWithWallet() {
    const msg = (text) => setText("wallet-msg", text);
    const eth = wallet();
    if (!eth) {
      msg(t("wallet_none"));
      return;
    }
    const btn = $("pay-browser");
    btn.disabled = true;
    // What to pay is fixed at the click: a pick made while the wallet asks changes nothing of it.
    const id = payChain(inv);
    const due = BigInt(btn.dataset.due || "0");
    const as = asset(inv);
    const to = inv.deposit_address;
    try {
      msg(t("wallet_confirm"));
      const accounts = await eth.request({ method: "eth_requestAccounts" });
      if (!Array.isArray(accounts) || !accounts.length) throw Object.assign(new Error(t("wallet_no_account")), { code: "account" });
      await switchChain(eth, id);
      // chainId: a wallet that checks it refuses to send on another chain.
      const tx = as.token
        ? { from: accounts[0], to: as.token, value: "0x0", data: transferData(to, due), chainId: hex(BigInt(id)) }
        : { from: accounts[0], to, value: hex(due), chainId: hex(BigInt(id)) };
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
  // The language links keep the token: it is in the fragment.
  document.querySelectorAll(".langs a").forEach((a) => (a.href = a.getAttribute("href").split("#")[0] + location.hash));
  if (!/^[A-Za-z0-9_-]{16,64}$/.test(token)) {
    invalid();
  } else {
    poll();
  }
  window.addEventListener("hashchange", () => location.reload());
})();

// The dashboard's own script (no library, no build step): copy buttons,
// one-time links' tokens from the URL fragment, and passkeys (WebAuthn).
"use strict";
(() => {
  const prefix = document.body.dataset.prefix || "";

  // Copy buttons: data-copy names an input, data-copy-text holds the text.
  document.addEventListener("click", async (e) => {
    const b = e.target.closest("button.copy");
    if (!b) return;
    const text = b.dataset.copyText || (document.getElementById(b.dataset.copy) || {}).value || "";
    try {
      await navigator.clipboard.writeText(text);
      const was = b.textContent;
      b.textContent = "✓";
      setTimeout(() => { b.textContent = was; }, 1500);
    } catch (_) {
      const el = document.getElementById(b.dataset.copy);
      if (el) { el.focus(); el.select(); }
    }
  });

  // A one-time link's token is the fragment: never sent to a server, put
  // in the form the person submits.
  const tok = document.getElementById("link-token");
  if (tok) tok.value = location.hash.slice(1);

  // base64url <-> ArrayBuffer.
  const b64u = {
    dec: (s) => {
      s = s.replace(/-/g, "+").replace(/_/g, "/");
      while (s.length % 4) s += "=";
      return Uint8Array.from(atob(s), (c) => c.charCodeAt(0)).buffer;
    },
    enc: (buf) => btoa(String.fromCharCode(...new Uint8Array(buf))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, ""),
  };

  async function post(path, body) {
    const res = await fetch(prefix + path, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: body === undefined ? "{}" : JSON.stringify(body),
    });
    const data = await res.json().catch(() => ({}));
    if (!res.ok) throw new Error(data.detail || res.statusText);
    return data;
  }

  function showError(err) {
    const el = document.getElementById("passkey-error");
    if (!el) return;
    el.textContent = err.message || String(err);
    el.hidden = false;
  }

  async function assertPasskey(next) {
    const opts = await post("/passkey/assert/begin");
    const pk = opts.publicKey;
    pk.challenge = b64u.dec(pk.challenge);
    (pk.allowCredentials || []).forEach((c) => { c.id = b64u.dec(c.id); });
    const cred = await navigator.credentials.get({ publicKey: pk });
    const r = cred.response;
    const body = {
      id: cred.id, rawId: b64u.enc(cred.rawId), type: cred.type,
      response: {
        clientDataJSON: b64u.enc(r.clientDataJSON), authenticatorData: b64u.enc(r.authenticatorData),
        signature: b64u.enc(r.signature), userHandle: r.userHandle ? b64u.enc(r.userHandle) : "",
      },
    };
    const q = next ? "?next=" + encodeURIComponent(next) : "";
    const out = await post("/passkey/assert/finish" + q, body);
    location.assign(out.next || prefix + "/");
  }

  for (const id of ["passkey-sign-in", "passkey-reauth"]) {
    const b = document.getElementById(id);
    if (b) b.addEventListener("click", () => assertPasskey(b.dataset.next).catch(showError));
  }

  const add = document.getElementById("passkey-add");
  if (add) add.addEventListener("click", async () => {
    try {
      const opts = await post("/account/passkeys/begin");
      const pk = opts.publicKey;
      pk.challenge = b64u.dec(pk.challenge);
      pk.user.id = b64u.dec(pk.user.id);
      (pk.excludeCredentials || []).forEach((c) => { c.id = b64u.dec(c.id); });
      const cred = await navigator.credentials.create({ publicKey: pk });
      const r = cred.response;
      const body = {
        id: cred.id, rawId: b64u.enc(cred.rawId), type: cred.type,
        response: { clientDataJSON: b64u.enc(r.clientDataJSON), attestationObject: b64u.enc(r.attestationObject),
          transports: r.getTransports ? r.getTransports() : [] },
      };
      const name = (document.getElementById("pk-name") || {}).value || "Passkey";
      await post("/account/passkeys/finish?name=" + encodeURIComponent(name), body);
      location.assign(prefix + "/account?msg=saved");
    } catch (err) { showError(err); }
  });
})();

// The branding page's live preview: the accent colour as the checkout
// applies it (CSSOM, the text black or white by WCAG contrast) and a
// picked logo from a blob: URL.
(() => {
  const pv = document.getElementById("preview");
  if (!pv) return;
  const lum = (hex) => {
    const c = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16) / 255)
      .map((v) => (v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4)));
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  };
  const apply = (hex) => {
    if (!/^#[0-9a-fA-F]{6}$/.test(hex)) return;
    pv.style.setProperty("--pv-accent", hex);
    const l = lum(hex);
    pv.style.setProperty("--pv-on-accent", (l + 0.05) / 0.05 > 1.05 / (l + 0.05) ? "#000000" : "#ffffff");
  };
  apply(pv.dataset.accent);
  const input = document.getElementById("accent");
  if (input) input.addEventListener("input", () => apply(input.value));
  const file = document.getElementById("logo");
  const img = document.getElementById("pv-logo");
  if (file && img) file.addEventListener("change", () => {
    const f = file.files && file.files[0];
    if (!f) return;
    img.src = URL.createObjectURL(f);
    img.hidden = false;
  });
})();

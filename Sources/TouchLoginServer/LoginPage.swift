/// The login web page: password sign-in and sign-up, "use passkey" through the browser's WebAuthn
/// API, and the signed-in account's devices. One self-contained page; the API does the work.
enum LoginPage {
    static let html = #"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>touchlogin</title>
        <style>
         body { font: 16px system-ui, sans-serif; max-width: 34rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
         fieldset { border: 1px solid #ccc; border-radius: 6px; margin-bottom: 1rem; }
         input { display: block; width: 100%; margin: .3rem 0 .7rem; padding: .4rem; box-sizing: border-box; }
         button { padding: .45rem .9rem; margin-right: .4rem; }
         #status { padding: .6rem; border-radius: 6px; background: #f3f3f3; min-height: 1.2rem; }
         .hidden { display: none; }
        </style>
        </head>
        <body>
        <h1>touchlogin</h1>
        <p id="status" role="status">Sign in with your password or a passkey.</p>
        <section id="signed-out">
         <fieldset>
          <legend>Password</legend>
          <label>Username <input id="username" autocomplete="username webauthn"></label>
          <label>Password <input id="password" type="password" autocomplete="current-password"></label>
          <button id="login">Sign in</button><button id="signup">Create account</button>
         </fieldset>
         <fieldset>
          <legend>Passkey</legend>
          <button id="passkey-login">Use passkey</button>
         </fieldset>
        </section>
        <section id="signed-in" class="hidden">
         <p>Signed in as <b id="who"></b> (<span id="how"></span>).</p>
         <fieldset>
          <legend>Devices that can sign you in</legend>
          <ul id="devices"></ul>
          <label>Name for this device <input id="device-name" value="browser"></label>
          <button id="passkey-register">Add a passkey</button>
         </fieldset>
         <fieldset>
          <legend>Password</legend>
          <label>Current <input id="current-password" type="password" autocomplete="current-password"></label>
          <label>New <input id="new-password" type="password" autocomplete="new-password"></label>
          <button id="change-password">Change password</button>
         </fieldset>
         <fieldset>
          <legend>Recent activity</legend>
          <ul id="activity"></ul>
         </fieldset>
         <fieldset id="step-up" class="hidden"><legend>Confirm it is you</legend>
          <label>Password <input id="step-up-password" type="password" autocomplete="current-password"></label>
          <button id="step-up-confirm">Confirm</button>
         </fieldset>
         <button id="logout">Sign out</button>
        </section>
        <script>
        "use strict";
        const $ = (id) => document.getElementById(id);
        let token = sessionStorage.getItem("token");
        const b64u = {
          decode: (s) => Uint8Array.from(atob(s.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((s.length + 3) % 4)), c => c.charCodeAt(0)).buffer,
          encode: (b) => btoa(String.fromCharCode(...new Uint8Array(b))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, ""),
        };
        function say(text) { $("status").textContent = text; }
        async function api(method, path, body) {
          const headers = { "Content-Type": "application/json" };
          if (token) headers.Authorization = "Bearer " + token;
          const response = await fetch("/api/" + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
          const text = await response.text();
          const data = text ? JSON.parse(text) : null;
          if (!response.ok) {
            const error = new Error(data && data.error ? data.error.message + " (" + data.error.code + ")" : response.statusText);
            error.code = data && data.error ? data.error.code : undefined;
            throw error;
          }
          return data;
        }
        // Devices change only with the password typed recently (the server's rule): when it asks, the
        // change waits for the password, then runs again.
        let pendingChange = null;
        async function change(step) {
          try { await step(); } catch (e) {
            if (e.code !== "step_up_required") throw e;
            pendingChange = step;
            $("step-up").classList.remove("hidden");
            say("Type your password again to change this account's devices.");
          }
        }
        function creationOptions(o) {
          return { ...o, challenge: b64u.decode(o.challenge), user: { ...o.user, id: b64u.decode(o.user.id) },
                   excludeCredentials: (o.excludeCredentials || []).map(c => ({ ...c, id: b64u.decode(c.id) })) };
        }
        function requestOptions(o) {
          return { ...o, challenge: b64u.decode(o.challenge), allowCredentials: (o.allowCredentials || []).map(c => ({ ...c, id: b64u.decode(c.id) })) };
        }
        function registrationJSON(c) {
          return { id: c.id, rawId: b64u.encode(c.rawId), type: c.type, clientExtensionResults: {}, authenticatorAttachment: c.authenticatorAttachment || undefined,
                   response: { clientDataJSON: b64u.encode(c.response.clientDataJSON), attestationObject: b64u.encode(c.response.attestationObject),
                               transports: c.response.getTransports ? c.response.getTransports() : [] } };
        }
        function assertionJSON(c) {
          return { id: c.id, rawId: b64u.encode(c.rawId), type: c.type, clientExtensionResults: {}, authenticatorAttachment: c.authenticatorAttachment || undefined,
                   response: { clientDataJSON: b64u.encode(c.response.clientDataJSON), authenticatorData: b64u.encode(c.response.authenticatorData),
                               signature: b64u.encode(c.response.signature), userHandle: c.response.userHandle ? b64u.encode(c.response.userHandle) : undefined } };
        }
        async function signedIn(session) {
          if (autofill) { autofill.abort(); autofill = null; }
          if (session) { token = session.token; sessionStorage.setItem("token", token); $("how").textContent = session.method; }
          // Kept across visits, so that others' wrong guesses at this name never lock this browser out.
          if (session && session.clientToken) localStorage.setItem("clientToken:" + session.username, session.clientToken);
          const account = await api("GET", "account");
          $("who").textContent = account.username;
          $("devices").replaceChildren(...account.devices.map(d => {
            const li = document.createElement("li");
            li.textContent = d.name + " (" + [d.attestedKey ? "attested: " + d.attestedKey : d.attestationFormat, d.backupEligible ? (d.backedUp ? "synced" : "may sync") : "this device only",
                                              ...(d.userVerified === true ? ["verifies the user"] : d.userVerified === false ? ["presence only"] : []), ...(d.transports || []),
                                              ...(d.aaguid && !/^[0-]+$/.test(d.aaguid) ? ["model " + d.aaguid] : [])].join(", ") + ") ";
            const rename = document.createElement("button");
            rename.textContent = "Rename";
            rename.onclick = () => run(() => change(async () => {
              const name = window.prompt("New name for " + d.name, d.name);
              if (name) { await api("PATCH", "devices/" + d.id, { name }); await signedIn(); say("Device renamed."); }
            }));
            li.append(rename);
            const remove = document.createElement("button");
            remove.textContent = "Remove";
            remove.onclick = () => run(() => change(async () => { await api("DELETE", "devices/" + d.id); await signedIn(); say("Device removed."); }));
            li.append(remove);
            return li;
          }));
          const when = (t) => new Date(t * 1000).toLocaleString();
          $("activity").replaceChildren(...(account.activity || []).slice(0, 20).map(a => {
            const li = document.createElement("li");
            li.textContent = when(a.at) + " — " + a.kind + (a.deviceName ? " “" + a.deviceName + "”" : "") + " from " + a.address;
            return li;
          }));
          $("signed-out").classList.add("hidden");
          $("signed-in").classList.remove("hidden");
        }
        function signedOut() {
          token = null; sessionStorage.removeItem("token");
          run(offerAutofill);
          $("signed-in").classList.add("hidden");
          $("signed-out").classList.remove("hidden");
        }
        async function run(step) { try { await step(); } catch (e) { say(e.message); } }
        $("login").onclick = () => run(async () => {
          const username = $("username").value;
          const clientToken = localStorage.getItem("clientToken:" + username.trim().toLowerCase()) || undefined;
          await signedIn(await api("POST", "session", { username, password: $("password").value, clientToken }));
          say("Signed in with your password.");
        });
        $("signup").onclick = () => run(async () => {
          await signedIn(await api("POST", "accounts", { username: $("username").value, password: $("password").value }));
          say("Account created.");
        });
        $("passkey-register").onclick = () => run(() => change(async () => {
          const options = await api("POST", "devices/options", { deviceName: $("device-name").value });
          const credential = await navigator.credentials.create({ publicKey: creationOptions(options.publicKey) });
          await api("POST", "devices", { deviceName: $("device-name").value, credential: registrationJSON(credential) });
          await signedIn();
          say("Passkey added: next time, sign in with it.");
        }));
        $("step-up-confirm").onclick = () => run(async () => {
          await api("POST", "session/password", { password: $("step-up-password").value });
          $("step-up-password").value = "";
          $("step-up").classList.add("hidden");
          const step = pendingChange;
          pendingChange = null;
          if (step) await change(step);
        });
        async function passkeyLogin(options, mediation, signal) {
          const credential = await navigator.credentials.get({ publicKey: requestOptions(options.publicKey), mediation, signal });
          const session = await api("POST", "passkey/login", { credential: assertionJSON(credential) });
          await signedIn(session);
          const added = (session.newDevices || []).map(d => "“" + d.name + "”").join(", ");
          say("Signed in with your passkey." + (added ? " Added since this passkey was last used: " + added + ". If that was not you, remove it and change your password." : ""));
        }
        // Passkey autofill (conditional mediation): the browser offers the passkeys it holds for this
        // site in the username field's suggestions; picking one signs in. A button press takes over.
        let autofill = null;
        async function offerAutofill() {
          if (token || !window.PublicKeyCredential || !PublicKeyCredential.isConditionalMediationAvailable ||
              !(await PublicKeyCredential.isConditionalMediationAvailable())) return;
          autofill = new AbortController();
          const options = await api("POST", "passkey/options", {});
          try { await passkeyLogin(options, "conditional", autofill.signal); } catch (e) { if (e.name !== "AbortError") say(e.message); }
        }
        $("passkey-login").onclick = () => run(async () => {
          if (autofill) { autofill.abort(); autofill = null; }
          const username = $("username").value.trim();
          await passkeyLogin(await api("POST", "passkey/options", username ? { username } : {}), "optional");
        });
        $("change-password").onclick = () => run(async () => {
          await api("POST", "account/password", { currentPassword: $("current-password").value, newPassword: $("new-password").value });
          $("current-password").value = ""; $("new-password").value = "";
          await signedIn();
          say("Password changed; every other session has ended.");
        });
        $("logout").onclick = () => run(async () => { await api("DELETE", "session"); signedOut(); say("Signed out."); });
        if (token) run(() => signedIn()).catch(signedOut);
        run(offerAutofill);
        </script>
        </body>
        </html>
        """#
}

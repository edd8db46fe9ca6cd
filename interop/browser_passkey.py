"""Drives touchlogin-server's login page in headless Chromium with a virtual authenticator
(Chrome DevTools Protocol, WebAuthn domain): create an account with a password, add a passkey,
sign out, sign in with the passkey.

usage: browser_passkey.py CHROMIUM SERVER_URL
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import websocket

CHROMIUM, SERVER = sys.argv[1], sys.argv[2].rstrip("/")
profile = tempfile.mkdtemp(prefix="la-chromium-")
browser = subprocess.Popen(
    [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
     "--remote-debugging-port=0", "--user-data-dir=" + profile, "about:blank"],
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def finish(code, message):
    print(message)
    browser.kill()
    browser.wait()
    shutil.rmtree(profile, ignore_errors=True)
    sys.exit(code)


try:
    port_file = os.path.join(profile, "DevToolsActivePort")
    for _ in range(300):
        if os.path.exists(port_file) and open(port_file).read().strip():
            break
        time.sleep(0.1)
    else:
        finish(2, "FAILED: Chromium did not open its DevTools port")
    port = open(port_file).read().split()[0]
    targets = json.load(urllib.request.urlopen("http://127.0.0.1:%s/json/list" % port, timeout=10))
    page = next(t for t in targets if t["type"] == "page")
    ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30)
    counter = [0]

    def send(method, **params):
        counter[0] += 1
        ws.send(json.dumps({"id": counter[0], "method": method, "params": params}))
        while True:
            message = json.loads(ws.recv())
            if message.get("id") == counter[0]:
                if "error" in message:
                    raise RuntimeError("%s: %s" % (method, message["error"]))
                return message.get("result", {})

    def js(expression):
        result = send("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError("page error: %s" % result["exceptionDetails"])
        return result["result"].get("value")

    def wait_status(text, timeout=20):
        deadline = time.time() + timeout
        status = ""
        while time.time() < deadline:
            status = js("document.getElementById('status').textContent")
            if text in status:
                print("ok:", status)
                return
            time.sleep(0.1)
        finish(1, "FAILED: waited for %r, the page says %r" % (text, status))

    send("WebAuthn.enable")
    authenticator = send("WebAuthn.addVirtualAuthenticator", options={
        "protocol": "ctap2", "transport": "internal", "hasResidentKey": True, "hasUserVerification": True,
        "isUserVerified": True, "automaticPresenceSimulation": True})["authenticatorId"]
    send("Page.enable")
    send("Page.navigate", url=SERVER + "/")
    for _ in range(200):
        if js("document.readyState") == "complete" and js("!!document.getElementById('signup')"):
            break
        time.sleep(0.05)

    js("document.getElementById('username').value = 'browser-user'; document.getElementById('password').value = 'correct horse battery'")
    js("document.getElementById('signup').click()")
    wait_status("Account created.")
    js("document.getElementById('device-name').value = 'headless chromium'")
    js("document.getElementById('passkey-register').click()")
    wait_status("Passkey added")
    devices = js("document.getElementById('devices').textContent")
    if "headless chromium" not in devices:
        finish(1, "FAILED: the device list shows %r" % devices)
    credentials = send("WebAuthn.getCredentials", authenticatorId=authenticator)["credentials"]
    if len(credentials) != 1:
        finish(1, "FAILED: the virtual authenticator holds %d credentials" % len(credentials))
    # Signed out, the page offers passkey autofill (conditional mediation); the virtual
    # authenticator approves at once, as a person picking the suggestion would.
    js("document.getElementById('logout').click()")
    wait_status("Signed in with your passkey.")
    print("ok: autofill signed in")
    if js("document.getElementById('how').textContent") != "passkey":
        finish(1, "FAILED: autofill did not sign in with the passkey")
    # Without autofill, the button.
    js("PublicKeyCredential.isConditionalMediationAvailable = async () => false")
    js("document.getElementById('logout').click()")
    wait_status("Signed out.")
    js("document.getElementById('password').value = ''")
    js("document.getElementById('passkey-login').click()")
    wait_status("Signed in with your passkey.")
    who = js("document.getElementById('who').textContent")
    how = js("document.getElementById('how').textContent")
    if who != "browser-user" or how != "passkey":
        finish(1, "FAILED: signed in as %r by %r" % (who, how))
    count = send("WebAuthn.getCredentials", authenticatorId=authenticator)["credentials"][0]["signCount"]
    activity = js("document.getElementById('activity').textContent")
    if "passkey-login" not in activity or "device-added" not in activity:
        finish(1, "FAILED: the activity list shows %r" % activity)
    # A passkey session changes devices only after the password is typed again (step-up).
    js("document.getElementById('passkey-register').click()")
    wait_status("Type your password again")
    js("document.getElementById('step-up-password').value = 'correct horse battery'")
    js("document.getElementById('step-up-confirm').click()")
    deadline = time.time() + 20
    while time.time() < deadline and not js("document.getElementById('step-up').classList.contains('hidden')"):
        time.sleep(0.1)
    if not js("document.getElementById('step-up').classList.contains('hidden')"):
        finish(1, "FAILED: the step-up was not accepted: %r" % js("document.getElementById('status').textContent"))
    print("ok: step-up accepted")
    shot = os.environ.get("TOUCHLOGIN_SCREENSHOT")
    if shot:
        send("Emulation.setDeviceMetricsOverride", width=900, height=1100, deviceScaleFactor=1, mobile=False)
        js("signedIn().then(() => say(\"Signed in with your passkey (autofill).\"))")
        time.sleep(0.5)
        with open(shot, "wb") as out:
            out.write(base64.b64decode(send("Page.captureScreenshot", format="png")["data"]))
    finish(0, "browser: passkey registered, signed out, signed in with it (sign count %d), step-up accepted" % count)
except Exception as error:
    finish(1, "FAILED: %s: %s" % (type(error).__name__, error))

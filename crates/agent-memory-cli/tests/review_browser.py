"""The review page in a real browser: headless Chromium (Debian's /usr/bin/chromium) driven by
Playwright, against a server `tests/review.rs` started and seeded.

    python review_browser.py MODE CONFIG.json

MODE is `e2e` (every check of the issue; prints `review browser scenario passed`), `tls`
(the cookie is Secure over HTTPS),
`screenshots` (the images of docs/review-page.md) or `latency` (page latency, printed as
`LATENCY {json}`). CONFIG names the base URL, the links the Rust side minted and what it
seeded. Playwright never downloads a browser here: it launches the system's Chromium.
"""

import base64
import http.client
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

from playwright.sync_api import Error as PlaywrightError, sync_playwright

CHROMIUM = os.environ.get("AGENT_MEMORY_TEST_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DESKTOP = {"width": 1100, "height": 860}
PHONE = {"width": 390, "height": 844}


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def tampered(link: str) -> str:
    """The same link with the user in its payload changed, keeping the tag."""
    prefix, token = link.split("token=", 1)
    encoded, tag = token.split(".", 1)
    payload = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    payload["user"] = "bob"
    forged = base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode())
    return f"{prefix}token={forged.decode().rstrip('=')}.{tag}"


def refused(browser, link, what):
    """A link that must get the 401 page and no cookie."""
    context = browser.new_context()
    page = context.new_page()
    response = page.goto(link)
    check(response.status == 401, f"{what}: status {response.status}")
    check("This link is no longer valid" in page.content(), f"{what}: page")
    check(context.cookies() == [], f"{what}: a cookie was set: {context.cookies()}")
    context.close()


def article(page, key):
    return page.locator("article", has=page.locator("h3.key", has_text=key))


def hidden(page, key, name):
    return article(page, key).locator(f'input[name="{name}"]').first.get_attribute("value")


def e2e(browser, config):
    base = config["base"]
    links = config["links"]
    hostile_key = config["hostile_key"]
    hostile_content = config["hostile_content"]

    # Expired (its second passed while the browser started), tampered, other application.
    while time.time() < config["expired_after"]:
        time.sleep(0.1)
    refused(browser, links["expired"], "expired link")
    refused(browser, tampered(links["alice_spare"]), "tampered link")
    refused(browser, links["other_app"], "another application's link")
    refused(browser, base + "/review/open?token=nonsense", "garbage token")

    # Sign in (a link the CLI minted): a cookie with the flags, a URL without the token.
    alice = browser.new_context(viewport=DESKTOP, accept_downloads=True)
    dialogs = []
    page = alice.new_page()
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    opened = page.goto(links["alice_cli"])
    check(opened.status == 200, f"sign-in: {opened.status}")
    check(page.url == base + "/review/", f"after sign-in the URL is {page.url}")
    headers = opened.headers
    csp = headers.get("content-security-policy", "")
    check("default-src 'none'" in csp and "frame-ancestors 'none'" in csp, f"CSP: {csp}")
    check("script-src" not in csp and "unsafe-inline" not in csp, f"CSP allows script: {csp}")
    check(headers.get("x-frame-options") == "DENY", "X-Frame-Options")
    check(headers.get("x-content-type-options") == "nosniff", "nosniff")
    check(headers.get("referrer-policy") == "no-referrer", "Referrer-Policy")
    cookies = alice.cookies()
    check(len(cookies) == 1, f"cookies: {cookies}")
    cookie = cookies[0]
    check(cookie["httpOnly"] and cookie["sameSite"] == "Strict", f"cookie flags: {cookie}")
    check(cookie["path"] == "/review/", f"cookie path: {cookie}")
    check(cookie["secure"] is False, "no Secure flag over plain HTTP (TLS sets it)")
    lifetime = cookie["expires"] - time.time()
    check(0 < lifetime <= config["ttl_seconds"] + 3600 + 5, f"cookie lifetime {lifetime}")
    check(page.evaluate("document.cookie") == "", "the session cookie is readable by script")

    # A forged Host (DNS rebinding) is refused before anything else.
    address = base.split("://", 1)[1]
    connection = http.client.HTTPConnection(address, timeout=10)
    connection.request("GET", "/review/", headers={"Host": "evil.example"})
    check(connection.getresponse().status == 403, "a foreign Host is refused")
    connection.close()

    # The same link again (a second browser) is refused.
    refused(browser, links["alice_cli"], "reused link")

    # First page: 20 records in key order, hostile content shown as text, nothing run.
    cards = page.locator("article")
    check(cards.count() == 20, f"first page shows {cards.count()} records")
    keys = [k.strip() for k in page.locator("h3.key").all_inner_texts()]
    check(keys == sorted(keys, key=lambda k: k.encode()), f"not in key order: {keys}")
    check(keys[0] == hostile_key, f"hostile key first: {keys[0]}")
    check(page.get_by_text(hostile_content).count() == 1, "hostile content is shown as text")
    check(page.locator("article script, article img").count() == 0, "stored markup became HTML")
    check(page.evaluate("window.__pwned") is None, "stored script ran")
    check(dialogs == [], f"dialogs opened: {dialogs}")
    check("Bob" not in page.content(), "another user's record is visible")

    # Next and Previous.
    page.get_by_role("link", name="Next").click()
    check(page.locator("article").count() == config["default_count"] - 20, "second page")
    check(page.get_by_role("link", name="Next").count() == 0, "no page after the last")
    page.get_by_role("link", name="Previous").click()
    check(page.locator("article").count() == 20, "back on the first page")
    check(page.locator("h3.key").first.inner_text().strip() == hostile_key, "first page again")

    # Namespaces.
    page.get_by_role("link", name="prefs").click()
    check(page.get_by_text("Be brief.").count() == 1, "the prefs namespace")
    page.get_by_role("link", name="default").click()

    # Search.
    page.get_by_label("Search your memories").fill("coffee")
    page.get_by_role("button", name="Search").click()
    found = page.locator("article .content").all_inner_texts()
    check(len(found) == config["coffee_count"] and all("coffee" in t for t in found),
          f"search found {found}")
    page.get_by_role("link", name="Clear search").click()

    # Edit note-03.
    article(page, "note-03").get_by_role("link", name="Edit").click()
    page.get_by_label("Content").fill("Now prefers green tea.")
    page.get_by_role("button", name="Save").click()
    check(page.get_by_role("status").inner_text() == "Saved.", "saved notice")
    check(article(page, "note-03").locator(".content").inner_text() == "Now prefers green tea.",
          "edited content")

    # A stale edit and a stale delete: two tabs on note-04.
    stale = alice.new_page()
    stale.goto(base + "/review/")
    page.goto(base + "/review/")
    article(page, "note-04").get_by_role("link", name="Edit").click()
    other = alice.new_page()
    other.goto(page.url)
    other.get_by_label("Content").fill("changed in another tab")
    other.get_by_role("button", name="Save").click()
    page.get_by_label("Content").fill("changed in the first tab")
    with page.expect_response(lambda r: r.url.endswith("/review/edit")) as answer:
        page.get_by_role("button", name="Save").click()
    check(answer.value.status == 409, f"stale edit: {answer.value.status}")
    check("changed elsewhere" in page.content(), "stale edit page")
    with stale.expect_response(lambda r: r.url.endswith("/review/delete")) as answer:
        article(stale, "note-04").get_by_role("button", name="Delete").click()
    check(answer.value.status == 409, f"stale delete: {answer.value.status}")
    page.goto(base + "/review/")
    check(article(page, "note-04").locator(".content").inner_text() == "changed in another tab",
          "the stale edit and delete changed nothing")
    stale.close()
    other.close()

    # Delete note-05.
    article(page, "note-05").get_by_role("button", name="Delete").click()
    check(page.get_by_role("status").inner_text() == "Deleted.", "deleted notice")
    check(article(page, "note-05").count() == 0, "note-05 is gone")

    # Refused writes: no CSRF token, another origin, Origin null without Sec-Fetch-Site, and a
    # real cross-site form (which gets no cookie: SameSite=Strict).
    csrf = hidden(page, "note-06", "csrf")
    revision = hidden(page, "note-06", "revision")
    form = {"ns": "", "key": "note-06", "revision": revision}
    attempts = [
        ("no CSRF token", form, {"Sec-Fetch-Site": "same-origin"}),
        ("wrong CSRF token", {**form, "csrf": "0" * 64}, {"Sec-Fetch-Site": "same-origin"}),
        ("cross-site", {**form, "csrf": csrf},
         {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}),
        ("foreign Origin", {**form, "csrf": csrf}, {"Origin": "https://evil.example"}),
        ("Origin null alone", {**form, "csrf": csrf}, {"Origin": "null"}),
    ]
    for what, fields, extra in attempts:
        response = alice.request.post(base + "/review/delete", form=fields, headers=extra,
                                      max_redirects=0)
        check(response.status == 403, f"{what}: {response.status}")
    evil = alice.new_page()
    evil.set_content(
        f'<form method="post" action="{base}/review/delete">'
        f'<input name="ns" value=""><input name="key" value="note-06">'
        f'<input name="revision" value="{revision}"><input name="csrf" value="{csrf}">'
        '<button>go</button></form>')
    with evil.expect_response(lambda r: r.url.endswith("/review/delete")) as answer:
        evil.get_by_role("button", name="go").click()
    check(answer.value.status in (401, 403), f"cross-site form: {answer.value.status}")
    evil.close()
    check(alice.request.get(base + "/review/delete").status == 405, "GET cannot delete")
    page.goto(base + "/review/")
    check(article(page, "note-06").count() == 1, "note-06 survived the refused requests")

    # JavaScript disabled: sign in, search, edit and delete with plain forms.
    nojs = browser.new_context(java_script_enabled=False, viewport=PHONE)
    plain = nojs.new_page()
    check(plain.goto(links["alice_nojs"]).status == 200, "sign-in without JavaScript")
    # The page's search finds every word in any case: "note 7:" is in notes 7 and 17.
    plain.get_by_label("Search your memories").fill("7: NOTE")
    plain.get_by_role("button", name="Search").click()
    check(plain.locator("article").count() == 2, "search without JavaScript")
    article(plain, "note-07").get_by_role("link", name="Edit").click()
    plain.get_by_label("Content").fill("Edited without JavaScript.")
    plain.get_by_role("button", name="Save").click()
    check(plain.get_by_role("status").inner_text() == "Saved.", "save without JavaScript")
    article(plain, "note-08").get_by_role("button", name="Delete").click()
    check(plain.get_by_role("status").inner_text() == "Deleted.", "delete without JavaScript")
    nojs.close()

    # Download: every live record of alice's, in the export format.
    page.goto(base + "/review/")
    with page.expect_download() as download:
        page.get_by_role("link", name="Download my data").click()
    lines = pathlib.Path(download.value.path()).read_text().splitlines()
    records = [json.loads(line) for line in lines]
    expected = config["alice_count"] - 2
    check(len(records) == expected, f"download holds {len(records)} records, not {expected}")
    check(all(r["scope"]["user_id"] == "alice" for r in records), "another user's record")
    by_key = {(r["scope"].get("namespace"), r["key"]): r for r in records}
    check(by_key[(None, "note-03")]["content"] == "Now prefers green tea.", "edit in download")
    check(by_key[(None, "note-07")]["content"] == "Edited without JavaScript.", "no-JS edit")
    check(by_key[(None, "note-03")]["metadata"] == {"topic": "drinks"}, "metadata kept by edit")
    check(("prefs", "tone") in by_key, "every namespace is in the download")
    check((None, "note-05") not in by_key and (None, "note-08") not in by_key, "deleted")
    for record in records:
        check(set(record) >= {"scope", "key", "content", "metadata", "revision", "created_at",
                              "updated_at", "expires_at", "source"}, f"fields: {set(record)}")

    # Bob sees only his records, and cannot reach alice's by naming them.
    bob = browser.new_context(viewport=DESKTOP)
    bob_page = bob.new_page()
    check(bob_page.goto(links["bob"]).status == 200, "bob signs in")
    check(bob_page.locator("article").count() == config["bob_count"], "bob's records")
    check("Note 1" not in bob_page.content() and hostile_key not in bob_page.content(),
          "bob sees alice's records")
    bob_page.goto(base + "/review/edit?ns=&key=note-00")
    check("Note 0" not in bob_page.content(), "bob reached alice's record")

    # Erase everything: the confirmation, then the count and what erasure reaches.
    page.get_by_role("link", name="Erase everything").click()
    page.get_by_label("Type ERASE to confirm").fill("erase")
    page.get_by_role("button", name="Erase everything").click()
    check("Nothing was erased" in page.content(), "a wrong confirmation erases nothing")
    page.get_by_label("Type ERASE to confirm").fill("ERASE")
    page.get_by_role("button", name="Erase everything").click()
    check(page.get_by_role("status").inner_text() == f"{expected} memories were erased.",
          f"erased page: {page.get_by_role('status').inner_text()}")
    check("What erasure reaches" in page.content(), "what erasure reaches")
    check(page.goto(base + "/review/").status == 401, "the session ended with the erasure")

    # Rotation: a new secret ends bob's session and old links within seconds; links signed
    # with the new secret work.
    key_file = pathlib.Path(config["key_file"])
    with tempfile.NamedTemporaryFile("w", dir=key_file.parent, delete=False) as new:
        new.write(config["rotated_secret"] + "\n")
    os.chmod(new.name, 0o600)
    os.replace(new.name, key_file)
    deadline = time.time() + 5
    while bob.request.get(base + "/review/").status != 401:
        check(time.time() < deadline, "bob's session outlived the rotation")
        time.sleep(0.1)
    refused(browser, links["alice_spare"], "a link signed with the old secret")
    rotated = browser.new_context()
    rotated_page = rotated.new_page()
    check(rotated_page.goto(links["bob_rotated"]).status == 200, "a link with the new secret")

    # Per-session rate limit: a burst past it gets 429 with Retry-After.
    statuses = [rotated.request.get(base + "/review/erase") for _ in range(130)]
    limited = [r for r in statuses if r.status == 429]
    check(limited and limited[0].headers.get("retry-after"), "no 429 in a burst of 130")

    # The page's actions are counted by kind only.
    metrics = rotated.request.get(base + "/metrics").text()
    check('agent_memory_review_actions_total{action="erase"} 1' in metrics, "erase counted")
    check('agent_memory_review_links_refused_total{reason="reused"}' in metrics, "reuse counted")
    for private in ("alice", "bob", "note-0", "coffee", hostile_key):
        check(private not in metrics, f"/metrics names {private!r}")

    # Sign out, once the session's bucket holds tokens again: the probe that finds it open
    # spends one, and at 10 a second the click right after it could still meet a 429.
    while rotated.request.get(base + "/review/erase").status == 429:
        time.sleep(0.2)
    time.sleep(1.0)
    rotated_page.get_by_role("button", name="Sign out").click()
    check("You are signed out" in rotated_page.content(), "signed out page")
    check(rotated.cookies() == [], f"cookie after sign-out: {rotated.cookies()}")
    check(rotated_page.goto(base + "/review/").status == 401, "signed out for good")
    print("RESULT " + json.dumps({"erased": expected}))
    print("review browser scenario passed")


def tls(browser, config):
    """Over HTTPS (HTTP/2, as Chromium negotiates it) the session cookie is also Secure."""
    context = browser.new_context(ignore_https_errors=True)
    page = context.new_page()
    opened = page.goto(config["links"]["alice"])
    check(opened.status == 200, f"sign-in over TLS: {opened.status} {page.content()[:300]}")
    cookie = context.cookies()[0]
    check(cookie["secure"] and cookie["httpOnly"] and cookie["sameSite"] == "Strict",
          f"cookie over TLS: {cookie}")
    # A form post over HTTP/2 (no Host header, only :authority) passes the same checks.
    page.get_by_role("button", name="Sign out").click()
    check("You are signed out" in page.content(), "sign-out over TLS")
    print("review browser scenario passed")


def screenshots(browser, config):
    """One image per state, at desktop or phone width, for docs/review-page.md."""
    out = pathlib.Path(config["screenshots"])
    out.mkdir(parents=True, exist_ok=True)
    base = config["base"]
    links = config["links"]

    def shot(page, name):
        # Phone images show the first screen, as a person sees it; desktop ones the page.
        full = not name.endswith("-phone")
        # Headless Chromium on a loaded machine sometimes answers "Unable to capture
        # screenshot" for a page that rendered; the capture, not the page, is retried.
        for attempt in range(4):
            try:
                page.screenshot(path=str(out / f"{name}.png"), full_page=full)
                return
            except PlaywrightError:
                if attempt == 3:
                    raise
                time.sleep(0.5)

    desktop = browser.new_context(viewport=DESKTOP)
    page = desktop.new_page()
    page.goto(links["alice_cli"])
    shot(page, "list-desktop")
    page.get_by_label("Search your memories").fill("coffee")
    page.get_by_role("button", name="Search").click()
    shot(page, "search-desktop")
    page.goto(base + "/review/")
    article(page, config.get("edit_key", "note-03")).get_by_role("link", name="Edit").click()
    shot(page, "edit-desktop")
    other = desktop.new_page()
    other.goto(page.url)
    other.get_by_role("button", name="Save").click()
    page.get_by_role("button", name="Save").click()
    shot(page, "conflict-desktop")

    phone = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True)
    small = phone.new_page()
    small.goto(links["alice_nojs"])
    small.set_viewport_size(PHONE)
    shot(small, "list-phone")
    small.goto(base + "/review/erase")
    shot(small, "erase-phone")
    small.get_by_label("Type ERASE to confirm").fill("ERASE")
    small.get_by_role("button", name="Erase everything").click()
    shot(small, "erased-phone")

    gone = browser.new_context(viewport=DESKTOP).new_page()
    gone.goto(links["alice_cli"])
    shot(gone, "invalid-link-desktop")
    print("review browser scenario passed")


def latency(browser, config):
    """p50 and p90 of a 20-record page (first and middle of the namespace), from the browser
    context's HTTP client, paced under the per-session rate limit."""
    context = browser.new_context()
    page = context.new_page()
    check(page.goto(config["links"]["alice_cli"]).status == 200, "sign-in")
    base = config["base"]
    # The middle page: follow Next a few times to get a cursor deep in the namespace.
    urls = [base + "/review/"]
    for _ in range(5):
        page.get_by_role("link", name="Next").click()
    urls.append(page.url)
    timings = {url: [] for url in urls}
    for round_ in range(config.get("rounds", 100)):
        for url in urls:
            started = time.perf_counter()
            response = context.request.get(url)
            elapsed = time.perf_counter() - started
            check(response.status == 200, f"status {response.status}")
            check(response.text().count("<article") == 20, "a page of 20")
            timings[url].append(elapsed * 1000)
            time.sleep(0.12)
    every = [t for ts in timings.values() for t in ts]
    every.sort()
    result = {
        "requests": len(every),
        "p50_ms": round(statistics.median(every), 2),
        "p90_ms": round(every[int(len(every) * 0.9) - 1], 2),
    }
    print("LATENCY " + json.dumps(result))
    print("review browser scenario passed")


def main():
    mode, config_path = sys.argv[1], sys.argv[2]
    config = json.loads(pathlib.Path(config_path).read_text())
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            {"e2e": e2e, "tls": tls, "screenshots": screenshots, "latency": latency}[mode](browser, config)
        finally:
            browser.close()


if __name__ == "__main__":
    main()

"""A real SMTP server for tests/email.rs: aiosmtpd (from PyPI; scripts/test.sh installs it).

Usage: smtp_server.py DIR PORT [--cert C --key K] [--user U --password P]

Every message received is written to DIR as NNN.json: the envelope, the headers the test
reads and the decoded text and HTML parts. With a certificate the server offers STARTTLS
and requires it before MAIL; with a user it requires AUTH (PLAIN or LOGIN, over TLS when
there is TLS). Recipients choose what goes wrong, as relays do it:

* refused@…: RCPT is answered 550 5.1.1 (a final refusal);
* busy@…: the first RCPT is answered 451 4.3.0 (try again later), later ones 250;
* crash@…: the first message is written to DIR, then the connection is dropped
  before the answer to DATA (the client cannot know it arrived).

Prints "ready" on stdout once it listens.
"""

import argparse
import asyncio
import email
import email.policy
import json
import os
import ssl
import sys
import logging
import time

# aiosmtpd logs its own deprecation of Session.login_data, which it sets itself.
logging.getLogger("mail.log").setLevel(logging.ERROR)

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

args = argparse.ArgumentParser()
args.add_argument("dir")
args.add_argument("port", type=int)
args.add_argument("--cert")
args.add_argument("--key")
args.add_argument("--user")
args.add_argument("--password")
a = args.parse_args()


class Handler:
    def __init__(self):
        self.count = 0
        self.busy_seen = False
        self.crashed = False

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        local = address.split("@")[0].lower()
        if local == "refused":
            return "550 5.1.1 <%s>: Recipient address rejected: User unknown" % address
        if local == "busy" and not self.busy_seen:
            self.busy_seen = True
            return "451 4.3.0 Temporary failure, try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.count += 1
        msg = email.message_from_bytes(envelope.original_content, policy=email.policy.default)
        text = msg.get_body(preferencelist=("plain",))
        html = msg.get_body(preferencelist=("html",))
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "content_type": msg.get_content_type(),
            "subject": str(msg.get("Subject", "")),
            "message_id": str(msg.get("Message-ID", "")),
            "in_reply_to": str(msg.get("In-Reply-To", "")),
            "references": str(msg.get("References", "")),
            "text": text.get_content() if text is not None else "",
            "html": html.get_content() if html is not None else "",
            "images": [
                {"content_id": str(part.get("Content-ID", "")), "content_type": part.get_content_type(),
                 "disposition": part.get_content_disposition(), "png": part.get_content()[:8] == b"\x89PNG\r\n\x1a\n"}
                for part in msg.walk() if part.get_content_maintype() == "image"
            ],
            "tls": session.ssl is not None,
            "authenticated": bool(session.authenticated),
        }
        path = os.path.join(a.dir, "%03d.json" % self.count)
        with open(path + ".tmp", "w") as f:
            json.dump(record, f)
        os.rename(path + ".tmp", path)
        if any(r.split("@")[0].lower() == "crash" for r in envelope.rcpt_tos) and not self.crashed:
            self.crashed = True
            server.transport.abort()
            # Nothing more is said on this connection.
            await asyncio.sleep(3600)
        return "250 2.0.0 Ok: queued"


def authenticator(server, session, envelope, mechanism, auth_data):
    ok = (
        isinstance(auth_data, LoginPassword)
        and auth_data.login.decode() == a.user
        and auth_data.password.decode() == a.password
    )
    # handled=False: aiosmtpd answers 535 5.7.8 itself on a failure.
    return AuthResult(success=ok, handled=False)


kwargs = {}
if a.cert:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(a.cert, a.key)
    kwargs.update(tls_context=ctx, require_starttls=True)
if a.user:
    kwargs.update(authenticator=authenticator, auth_required=True, auth_require_tls=bool(a.cert))
controller = Controller(Handler(), hostname="127.0.0.1", port=a.port, server_hostname="localhost", **kwargs)
controller.start()
print("ready", flush=True)
try:
    while True:
        time.sleep(3600)
finally:
    controller.stop()

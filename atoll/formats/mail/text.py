"""Message content: body text (plain preferred, HTML converted) and attachments."""

from __future__ import annotations

import email
import re
from dataclasses import dataclass
from email.message import Message
from email.policy import compat32
from html.parser import HTMLParser

from atoll.formats.mail.headers import decode_bytes, decode_value


class _TextExtractor(HTMLParser):
    _BLOCK = {
        "p",
        "div",
        "br",
        "li",
        "tr",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "table",
        "ul",
        "ol",
        "blockquote",
    }
    _SKIP = {"script", "style", "head", "title"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in self._SKIP:
            self._skip += 1
        elif tag in self._BLOCK:
            self.parts.append("\n")
        if tag == "li":
            self.parts.append("- ")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP:
            self._skip = max(0, self._skip - 1)
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """Readable text of an HTML body (tags dropped, blocks on their own lines)."""
    parser = _TextExtractor()
    try:
        parser.feed(html)
        parser.close()
    except Exception:  # malformed HTML: keep what was parsed
        pass
    lines = [" ".join(line.split()) for line in "".join(parser.parts).splitlines()]
    text = "\n".join(lines)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.strip()


def parse(raw: bytes) -> Message:
    """A lenient parse (compat32 never raises on bad headers)."""
    return email.message_from_bytes(raw, policy=compat32)


def _part_text(part: Message) -> str:
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        payload = str(part.get_payload() or "").encode("utf-8", "replace")
    charset = part.get_content_charset()
    if charset:
        try:
            return payload.decode(charset, errors="replace")
        except LookupError:
            pass
    return decode_bytes(payload)


def _is_attachment(part: Message) -> bool:
    disposition = (part.get("Content-Disposition") or "").lower()
    return disposition.startswith("attachment") or (bool(part.get_filename()) and not part.is_multipart())


_QUOTED_FROM = re.compile(r"(?m)^>(>*From )")


def message_text(raw: bytes) -> tuple[str, str]:
    """(body text, "plain"|"html") of a message; HTML-only bodies are converted to text.

    Lines the mbox format quoted as ``>From `` are shown as written (``From ``).
    """
    text, kind = _message_text(raw)
    return _QUOTED_FROM.sub(r"\1", text), kind


def _message_text(raw: bytes) -> tuple[str, str]:
    message = parse(raw)
    plain: list[str] = []
    html: list[str] = []
    for part in message.walk():
        if part.is_multipart() or _is_attachment(part):
            continue
        kind = part.get_content_type()
        if kind == "text/plain":
            plain.append(_part_text(part))
        elif kind == "text/html":
            html.append(_part_text(part))
    if plain:
        return "\n".join(plain).strip("\n"), "plain"
    if html:
        return html_to_text("\n".join(html)), "html"
    return "", "plain"


@dataclass
class Attachment:
    filename: str
    content_type: str
    size: int
    data: bytes


def attachments_of(raw: bytes) -> list[Attachment]:
    """The attachments of a message, in order (unnamed ones get ``attachment-N``)."""
    found: list[Attachment] = []
    for part in parse(raw).walk():
        if part.is_multipart() or not _is_attachment(part):
            continue
        data = part.get_payload(decode=True)
        if not isinstance(data, bytes):
            data = b""
        name = part.get_filename()
        name = decode_value(name) if name else f"attachment-{len(found) + 1}"
        found.append(Attachment(name, part.get_content_type(), len(data), data))
    return found


_CHARSET = re.compile(r"charset\s*=\s*\"?([A-Za-z0-9_.:-]+)", re.IGNORECASE)
_TAG = re.compile(r"<[^>]*>")


def search_text(raw: bytes) -> str:
    """Body text for searching, fast: single-part text bodies are decoded directly from
    their headers; anything else goes through the full parser (:func:`message_text`)."""
    from html import unescape

    from atoll.formats.mail.headers import parse_header_block, split_header

    header, body_start = split_header(raw)
    fields, _ = parse_header_block(header)
    content_type = fields.get("content-type", "text/plain").lower()
    encoding = fields.get("content-transfer-encoding", "7bit").strip().lower()
    if not content_type.startswith(("text/plain", "text/html")):
        return message_text(raw)[0]
    body = raw[body_start:]
    if encoding == "quoted-printable":
        import quopri

        body = quopri.decodestring(body)
    elif encoding == "base64":
        import base64
        import binascii

        try:
            body = base64.b64decode(body)
        except (binascii.Error, ValueError):
            return message_text(raw)[0]
    match = _CHARSET.search(content_type)
    try:
        text = body.decode(match.group(1), errors="replace") if match else decode_bytes(body)
    except LookupError:
        text = decode_bytes(body)
    if content_type.startswith("text/html"):
        text = unescape(_TAG.sub(" ", text))
    return _QUOTED_FROM.sub(r"\1", text)
